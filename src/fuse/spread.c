/* SPDX-License-Identifier: MIT */
/* spread.c - see spread.h. */
#include "fuse/spread.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/bind_cpu.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cpu_set_t allowed;        /* the daemon's CPUs when it started */
static unsigned ncpu;            /* highest allowed CPU + 1 */
static atomic_uint *decompressing; /* per CPU: our decompressions there */

static _Thread_local int counted_cpu = -1; /* where ours is counted */
static _Thread_local bool moved;          /* bound for this one only */

static void init(void)
{
	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 ||
	    CPU_COUNT(&allowed) < 2)
		return;
	for (unsigned c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &allowed))
			ncpu = c + 1;
	decompressing = calloc(ncpu, sizeof(*decompressing));
}

static void start_decompression(void)
{
	int cur = sched_getcpu();
	unsigned cpu;

	if (cur < 0 || (unsigned)cur >= ncpu)
		return;
	cpu = (unsigned)cur;
	if (atomic_load_explicit(&decompressing[cpu], memory_order_relaxed)) {
		for (unsigned i = 1; i < ncpu; i++) {
			unsigned c = (cpu + i) % ncpu;

			if (!CPU_ISSET(c, &allowed) ||
			    atomic_load_explicit(&decompressing[c],
						 memory_order_relaxed))
				continue;
			if (lsq_bind_to_cpu(c) == 0) {
				cpu = c;
				moved = true;
			}
			break;
		}
	}
	counted_cpu = (int)cpu;
	atomic_fetch_add_explicit(&decompressing[cpu], 1,
				  memory_order_relaxed);
}

static void end_decompression(void)
{
	if (counted_cpu >= 0)
		atomic_fetch_sub_explicit(&decompressing[counted_cpu], 1,
					  memory_order_relaxed);
	counted_cpu = -1;
	/* Widening the mask moves nothing: the thread stays where it is. */
	if (moved && sched_setaffinity(0, sizeof(allowed), &allowed) == 0)
		moved = false;
}

static void worker_long_work(enum lsq_long_work what, bool done)
{
	if (what != LSQ_WORK_DECOMPRESS)
		return;
	if (done)
		end_decompression();
	else
		start_decompression();
}

lsq_long_work_fn lsq_spread_long_work(void)
{
	pthread_once(&once, init);
	return decompressing ? worker_long_work : NULL;
}
