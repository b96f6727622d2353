/* SPDX-License-Identifier: MIT */
/*
 * log.h - one-line messages to stderr (and syslog once daemonized).
 *
 * lsq_log_once() keys on a 64-bit value (usually an image offset) so a
 * corrupt block read a million times is reported once.
 */
#ifndef LSQ_LOG_H
#define LSQ_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum lsq_log_level {
	LSQ_LOG_SILENT = -1, /* as a threshold only: log nothing */
	LSQ_LOG_ERROR,
	LSQ_LOG_WARNING,
	LSQ_LOG_INFO,
	LSQ_LOG_DEBUG,
};

/* Process-wide settings; set once at start-up before threads exist. */
void lsq_log_set_level(enum lsq_log_level level);
void lsq_log_use_syslog(bool on);
void lsq_log_set_prefix(const char *prefix);

void lsq_log(enum lsq_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Log only the first time this (level-independent) key is seen; a bounded
 * table, so a flood of distinct keys degrades to logging them all. */
void lsq_log_once(uint64_t key, enum lsq_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The last error or warning line logged (even below the log level), when
 * (0: never), and how many were logged in the last 60 seconds (of the
 * last 64): for `sqfs-lazy-mount --status`. */
void lsq_log_last_problem(char *buf, size_t size, time_t *when,
			  unsigned *last_minute);

#define lsq_err_log(...) lsq_log(LSQ_LOG_ERROR, __VA_ARGS__)
#define lsq_warn(...) lsq_log(LSQ_LOG_WARNING, __VA_ARGS__)
#define lsq_info(...) lsq_log(LSQ_LOG_INFO, __VA_ARGS__)
#define lsq_debug(...) lsq_log(LSQ_LOG_DEBUG, __VA_ARGS__)

#endif
