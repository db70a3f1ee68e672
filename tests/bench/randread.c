/* SPDX-License-Identifier: Apache-2.0 */
/*
 * randread — the random-read ceiling of a source: THREADS threads, each
 * reading ranges of LEN bytes at random offsets of the given files with
 * pread, one at a time, for SECONDS seconds (or COUNT reads in all).
 *
 *   randread [--threads N] [--seconds S] [--count N] [--len BYTES] [--seed K] FILE...
 *
 * Prints one JSON line: reads, bytes, seconds, reads_per_s, cpu_s (user +
 * system of this process). A baseline of scripts/bench's 'remote' part: what
 * a reader with that many reads in flight gets from the source.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct file {
	int fd;
	uint64_t size;
};

static struct file *files;
static size_t nfiles;
static uint64_t len = 180, total_size;
static double seconds = 5;
static uint64_t count; /* 0: until `seconds` */
static atomic_uint_fast64_t nreads, nbytes, nerrors, issued;
static atomic_bool stop;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void *reader(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg;
	char *buf = malloc(len);

	if (!buf)
		return NULL;
	while (!atomic_load(&stop)) {
		uint64_t r = next_rand(&s) % total_size, off;
		size_t f = 0;
		ssize_t n;

		if (count && atomic_fetch_add(&issued, 1) >= count)
			break;
		/* a file with probability proportional to its size */
		while (f + 1 < nfiles && r >= files[f].size) {
			r -= files[f].size;
			f++;
		}
		off = files[f].size > len ? r % (files[f].size - len) : 0;
		n = pread(files[f].fd, buf, len, (off_t)off);
		if (n < 0) {
			atomic_fetch_add(&nerrors, 1);
			continue;
		}
		atomic_fetch_add(&nreads, 1);
		atomic_fetch_add(&nbytes, (uint64_t)n);
	}
	free(buf);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned threads = 256;
	uint64_t seed = 1;
	struct rusage ru;
	pthread_attr_t attr;
	pthread_t *tids;
	double t0, t1;
	int i;

	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
		if (i + 1 >= argc)
			goto usage;
		if (strcmp(argv[i], "--threads") == 0)
			threads = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--seconds") == 0)
			seconds = strtod(argv[i + 1], NULL);
		else if (strcmp(argv[i], "--count") == 0)
			count = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--len") == 0)
			len = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--seed") == 0)
			seed = strtoull(argv[i + 1], NULL, 10);
		else
			goto usage;
	}
	if (i >= argc || !threads || !len)
		goto usage;
	nfiles = (size_t)(argc - i);
	files = calloc(nfiles, sizeof(*files));
	tids = calloc(threads, sizeof(*tids));
	if (!files || !tids)
		return 1;
	for (size_t f = 0; f < nfiles; f++) {
		struct stat st;

		files[f].fd = open(argv[i + (int)f], O_RDONLY | O_CLOEXEC);
		if (files[f].fd < 0 || fstat(files[f].fd, &st) != 0) {
			fprintf(stderr, "randread: %s: %s\n", argv[i + (int)f], strerror(errno));
			return 1;
		}
		files[f].size = (uint64_t)st.st_size;
		total_size += files[f].size;
	}
	if (!total_size) {
		fprintf(stderr, "randread: the files are empty\n");
		return 1;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 10);
	t0 = now();
	for (unsigned t = 0; t < threads; t++)
		if (pthread_create(&tids[t], &attr, reader,
				   (void *)(uintptr_t)(seed * 1000003u + t + 1)) != 0)
			return 1;
	if (!count) {
		struct timespec ts = { (time_t)seconds,
				       (long)((seconds - (double)(time_t)seconds) * 1e9) };
		nanosleep(&ts, NULL);
		atomic_store(&stop, true);
	}
	for (unsigned t = 0; t < threads; t++)
		pthread_join(tids[t], NULL);
	t1 = now();
	getrusage(RUSAGE_SELF, &ru);
	printf("{\"reads\": %llu, \"bytes\": %llu, \"errors\": %llu, \"seconds\": %.3f, "
	       "\"reads_per_s\": %.1f, \"cpu_s\": %.3f}\n",
	       (unsigned long long)atomic_load(&nreads), (unsigned long long)atomic_load(&nbytes),
	       (unsigned long long)atomic_load(&nerrors), t1 - t0,
	       (double)atomic_load(&nreads) / (t1 - t0),
	       (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
		       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6);
	return 0;
usage:
	fprintf(stderr, "usage: randread [--threads N] [--seconds S] [--count N] [--len BYTES] "
			"[--seed K] FILE...\n");
	return 2;
}
