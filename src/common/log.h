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
#include <stdint.h>

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

#define lsq_err_log(...) lsq_log(LSQ_LOG_ERROR, __VA_ARGS__)
#define lsq_warn(...) lsq_log(LSQ_LOG_WARNING, __VA_ARGS__)
#define lsq_info(...) lsq_log(LSQ_LOG_INFO, __VA_ARGS__)
#define lsq_debug(...) lsq_log(LSQ_LOG_DEBUG, __VA_ARGS__)

#endif
