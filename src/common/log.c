/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <pthread.h>
#include <time.h>

#include "common/log.h"

static enum lsq_log_level max_level = LSQ_LOG_INFO;
static bool to_syslog;
static const char *log_prefix = "sqfs-lazy";

void lsq_log_set_level(enum lsq_log_level level) { max_level = level; }
void lsq_log_use_syslog(bool on) { to_syslog = on; }
void lsq_log_set_prefix(const char *prefix) { log_prefix = prefix; }

static void vlog(enum lsq_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* The problems (errors and warnings) for --status: the last line, and
 * when the last PROBLEM_TIMES were logged. Problems are rare and logging
 * them is no hot path: one lock. */
#define PROBLEM_TIMES 64
static pthread_mutex_t problem_mu = PTHREAD_MUTEX_INITIALIZER;
static char problem_line[512];
static time_t problem_times[PROBLEM_TIMES];
static unsigned problem_count;

static void note_problem(const char *line)
{
	time_t now = time(NULL);

	pthread_mutex_lock(&problem_mu);
	size_t n = strnlen(line, sizeof(problem_line) - 1);

	memcpy(problem_line, line, n);  /* cut at 511 bytes */
	problem_line[n] = '\0';
	problem_times[problem_count++ % PROBLEM_TIMES] = now;
	pthread_mutex_unlock(&problem_mu);
}

void lsq_log_last_problem(char *buf, size_t size, time_t *when,
			  unsigned *last_minute)
{
	time_t now = time(NULL);
	unsigned n = 0;

	pthread_mutex_lock(&problem_mu);
	if (size > 0)
		snprintf(buf, size, "%s", problem_line);
	*when = problem_count ? problem_times[(problem_count - 1) % PROBLEM_TIMES]
			      : 0;
	for (unsigned i = 0; i < PROBLEM_TIMES && i < problem_count; i++)
		if (problem_times[i] > now - 60)
			n++;
	pthread_mutex_unlock(&problem_mu);
	*last_minute = n;
}

static void vlog(enum lsq_log_level level, const char *fmt, va_list ap)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char line[4096];

	if (level < LSQ_LOG_ERROR ||
	    (level > max_level && level > LSQ_LOG_WARNING))
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	if (level <= LSQ_LOG_WARNING)
		note_problem(line);
	if (level > max_level)
		return;
	if (to_syslog)
		syslog(prio[level], "%s", line);
	else
		/* one fprintf per line keeps lines from threads whole */
		fprintf(stderr, "%s: %s\n", log_prefix, line);
}

void lsq_log(enum lsq_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

#define ONCE_SLOTS 1024

/* Lock-free open-addressed set of seen keys; key+1 is stored so 0 marks a
 * free slot. When it fills up, messages are no longer suppressed. */
static atomic_uint_least64_t once_seen[ONCE_SLOTS];

static bool first_time(uint64_t key)
{
	uint64_t tag = key + 1;
	size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 54) % ONCE_SLOTS;

	if (tag == 0)
		tag = 1;
	for (size_t n = 0; n < 16; n++, i = (i + 1) % ONCE_SLOTS) {
		uint_least64_t cur = atomic_load(&once_seen[i]);

		if (cur == tag)
			return false;
		if (cur == 0) {
			uint_least64_t expected = 0;

			if (atomic_compare_exchange_strong(&once_seen[i],
							   &expected, tag))
				return true;
			if (expected == tag)
				return false;
		}
	}
	return true;
}

void lsq_log_once(uint64_t key, enum lsq_log_level level, const char *fmt, ...)
{
	va_list ap;

	if (!first_time(key))
		return;
	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

