/* SPDX-License-Identifier: MIT */
/* bind_cpu.h - CPUs: bind the calling thread to one; count those online. */
#ifndef LSQ_COMMON_BIND_CPU_H
#define LSQ_COMMON_BIND_CPU_H

#include <sched.h>
#include <unistd.h>

/* 0, or -1 with errno (EINVAL when the CPU is outside our cpuset). */
static inline int lsq_bind_to_cpu(unsigned cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	return sched_setaffinity(0, sizeof(one), &one);
}

/* The CPUs online, at least 1. */
static inline unsigned lsq_online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (unsigned)n : 1;
}

#endif
