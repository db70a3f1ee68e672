/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_clock.h — the clocks the bench programs report: wall time
 * (CLOCK_MONOTONIC) and the process's CPU time (user + system), in seconds.
 */
#ifndef BFS_TESTS_BENCH_CLOCK_H
#define BFS_TESTS_BENCH_CLOCK_H

#include <sys/resource.h>
#include <time.h>

static inline double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline double cpu_now(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

#endif
