/* SPDX-License-Identifier: MIT */
/* bind_cpu.h - bind the calling thread to one CPU. */
#ifndef LSQ_COMMON_BIND_CPU_H
#define LSQ_COMMON_BIND_CPU_H

#include <sched.h>

/* 0, or -1 with errno (EINVAL when the CPU is outside our cpuset). */
static inline int lsq_bind_to_cpu(unsigned cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	return sched_setaffinity(0, sizeof(one), &one);
}

#endif
