/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fetch_probe.c — the choice of the I/O stage's backend: BFS_FETCH_AUTO
 * measures io_uring against the reader threads on the source's
 * filesystems (and reads FUSE's max_background) and picks one, with the
 * reason that st.backend_reason reports; bfs_fetch_new opens the stage
 * with the backend asked for or picked.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fetch_impl.h"

#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#define FUSE_MAGIC 0x65735546L /* statfs f_type of a FUSE filesystem */
#define FUSECTL "/sys/fs/fuse/connections"
#define FUSE_DEFAULT_BG 12 /* the kernel's max_background, which libfuse 3 keeps */
#define PROBE_READS 256 /* reads of the AUTO probe, at most */
#define PROBE_LEN ((uint64_t)16) /* bytes of a probe read: a request, not bandwidth */
#define PROBE_MIN 24 /* fewer reads tell 12 at a time from all at once too poorly */
#define PROBE_ROUNDS 3 /* of each backend; the first warms up */
#define PROBE_WAIT_NS 2000000000ll /* a probe that takes longer has failed */
#define PROBE_MAX_DEVS 16 /* filesystems looked at, at most */

long bfs_fetch_fuse_max_background(int fd)
{
	struct statfs sfs;
	struct stat st;
	char path[96], buf[32];
	unsigned kdev;
	ssize_t n;
	long v;
	int d;

	if (fstatfs(fd, &sfs) != 0 || (long)(unsigned int)sfs.f_type != FUSE_MAGIC)
		return 0;
	if (fstat(fd, &st) != 0)
		return -1;
	/* fusectl names a connection by the kernel's encoding of its device */
	kdev = (major(st.st_dev) << 20) | minor(st.st_dev);
	snprintf(path, sizeof(path), FUSECTL "/%u/max_background", kdev);
	d = open(path, O_RDONLY | O_CLOEXEC);
	if (d < 0)
		return -1;
	n = read(d, buf, sizeof(buf) - 1);
	close(d);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	v = strtol(buf, NULL, 10);
	return v > 0 ? v : -1;
}

enum bfs_fetch_backend bfs_fetch_choose_fuse(long max_bg, unsigned depth, int64_t uring_ns,
					     int64_t threads_ns, char *why, size_t len)
{
	static const char held[] = "the kernel holds io_uring's reads of a FUSE file to its "
				   "max_background, not a reader thread's";

	if (max_bg > 0 && (unsigned long)max_bg >= depth) {
		snprintf(why, len, "io_uring: FUSE source's max_background is %ld, io_depth %u",
			 max_bg, depth);
		return BFS_FETCH_URING;
	}
	if (max_bg > 0) {
		snprintf(why, len,
			 "threads: FUSE source's max_background is %ld, below io_depth %u (%s)",
			 max_bg, depth, held);
		return BFS_FETCH_THREADS;
	}
	if ((uring_ns == 0 || threads_ns == 0) && depth <= FUSE_DEFAULT_BG) {
		snprintf(why, len,
			 "io_uring: FUSE source's max_background unknown, not timed; libfuse's "
			 "default (%d) is at least io_depth %u",
			 FUSE_DEFAULT_BG, depth);
		return BFS_FETCH_URING;
	}
	if (uring_ns == 0 || threads_ns == 0) {
		snprintf(why, len,
			 "threads: FUSE source's max_background unknown, not timed; libfuse's "
			 "default (%d) is below io_depth %u (%s)",
			 FUSE_DEFAULT_BG, depth, held);
		return BFS_FETCH_THREADS;
	}
	if (uring_ns < 0 || threads_ns < 0 || (double)uring_ns > 1.5 * (double)threads_ns) {
		char u[32], t[32];

		snprintf(u, sizeof(u), uring_ns < 0 ? "over 2 s" : "%.1f ms",
			 (double)uring_ns / 1e6);
		snprintf(t, sizeof(t), threads_ns < 0 ? "over 2 s" : "%.1f ms",
			 (double)threads_ns / 1e6);
		if (uring_ns >= 0 && threads_ns < 0) {
			snprintf(why, len,
				 "io_uring: FUSE source, %u reads took %s through io_uring, %s "
				 "through "
				 "reader threads",
				 depth, u, t);
			return BFS_FETCH_URING;
		}
		snprintf(why, len,
			 "threads: FUSE source, %u reads took %s through io_uring, %s through "
			 "reader "
			 "threads (%s; fusectl does not say it here)",
			 depth, u, t, held);
		return BFS_FETCH_THREADS;
	}
	snprintf(why, len,
		 "io_uring: FUSE source, %u reads took %.1f ms through io_uring, %.1f ms through "
		 "reader threads",
		 depth, (double)uring_ns / 1e6, (double)threads_ns / 1e6);
	return BFS_FETCH_URING;
}

/* A stage of n reads in flight through backend be, for timing the source:
 * it bypasses a local copy. NULL when be does not start. */
static struct bfs_fetch *probe_open(uint32_t nobj, const struct bfs_fetch_source *src,
				    const struct bfs_fetch_backend_ops *be, size_t n)
{
	struct bfs_fetch_source s = *src;
	struct bfs_fetch_opts o = {
		.depth = (unsigned)n,
		.budget = UINT64_MAX,
		.max_read = PROBE_LEN,
		.backend = be == &bfs_fetch_threads_ops ? BFS_FETCH_THREADS : BFS_FETCH_URING,
	};
	struct bfs_fetch *f;

	s.local = NULL;
	s.fetched = NULL;
	return bfs_fetch_open(&f, nobj, &s, &o, be, NULL) == 0 ? f : NULL;
}

/* The time the n reads r[0..n) (modified) take through f at once, in ns;
 * -1 when they did not all end within PROBE_WAIT_NS. */
static int64_t probe_time(struct bfs_fetch *f, struct bfs_fetch_range *r, size_t n)
{
	struct bfs_fetch_ticket *t = NULL;
	struct timespec dl;
	int64_t ns = -1;
	uint64_t t0;
	bool late = false;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += PROBE_WAIT_NS / 1000000000ll;
	t0 = bfs_now_ns();
	if (bfs_fetch_want(f, r, n, BFS_FETCH_NOW, BFS_WANT_DEMAND | BFS_WANT_NO_GAPS, &t) != 0)
		return -1;
	pthread_mutex_lock(&f->lock);
	for (size_t k = 0; k < t->n && !late; k++)
		while (t->x[k]->state == X_PENDING || t->x[k]->state == X_INFLIGHT)
			if (pthread_cond_timedwait(&f->done, &f->lock, &dl) == ETIMEDOUT) {
				late = true;
				break;
			}
	pthread_mutex_unlock(&f->lock);
	ns = late ? -1 : (int64_t)(bfs_now_ns() - t0) + 1;
	bfs_fetch_release(f, t);
	return ns;
}

/* Up to n probe reads of the objects of filesystem dev, round `part` of
 * `parts`: parts * n slots spread over the objects, each round its own
 * (a page cache serves no round from another's reads); apart (never one
 * read) where the objects are small. Bytes a local copy holds are left
 * out: a mount over a warm disk cache reads nothing from the source. How
 * many were made. */
static size_t probe_ranges(uint32_t nobj, const struct bfs_fetch_source *src, uint64_t dev,
			   unsigned part, unsigned parts, struct bfs_fetch_range *r, size_t n)
{
	uint32_t nd = 0;
	size_t m = 0;

	for (uint32_t i = 0; i < nobj; i++)
		nd += src->dev(src->ctx, i) == dev && src->size(src->ctx, i) > 0;
	if (!nd)
		return 0;
	for (uint32_t i = 0; i < nobj && m < n; i++) {
		uint64_t size = src->size(src->ctx, i), per = (parts * n + nd - 1) / nd, step;

		if (src->dev(src->ctx, i) != dev || size == 0)
			continue;
		step = size / per;
		for (uint64_t q = part; q < per && m < n && (step >= 2 || q < parts); q += parts) {
			uint8_t held[PROBE_LEN];

			r[m].obj = i;
			if (step >= 2 * PROBE_LEN) {
				r[m].off = step * q - step * q % PROBE_LEN;
				r[m].len = PROBE_LEN;
			} else if (step >= 2) {
				r[m].off = step * q;
				r[m].len = step / 2;
			} else {
				r[m].off = q < size ? q : 0;
				r[m].len = 1;
			}
			if (!src->local || !src->local(src->ctx, i, r[m].off, held, r[m].len))
				m++;
		}
	}
	return m;
}

/* Time n reads of filesystem dev through io_uring and through reader
 * threads, PROBE_ROUNDS rounds of each in turn: the first warms both up
 * (threads and kernel workers start), the best of the others counts (a
 * loaded machine delays some rounds, never speeds one up). *tu, *tt: 0
 * when not timed (too few bytes outside a local copy), -1 when a round
 * did not end in time. */
static void probe_dev(uint32_t nobj, const struct bfs_fetch_source *src, uint64_t dev, size_t n,
		      int64_t *tu, int64_t *tt)
{
	struct bfs_fetch_range *r = calloc(n, sizeof(*r));
	struct bfs_fetch *fu = NULL, *ft = NULL;

	*tu = *tt = 0;
	if (!r)
		return;
	fu = probe_open(nobj, src, bfs_fetch_uring_ops, n);
	ft = probe_open(nobj, src, &bfs_fetch_threads_ops, n);
	if (!fu || !ft)
		goto out;
	for (unsigned k = 0; k < PROBE_ROUNDS; k++) {
		size_t m = probe_ranges(nobj, src, dev, 2 * k, 2 * PROBE_ROUNDS, r, n);
		int64_t th, t;

		if (m < PROBE_MIN)
			break;
		th = probe_time(ft, r, m);
		if (k > 0 && (*tt == 0 || (th >= 0 && (th < *tt || *tt < 0))))
			*tt = th;
		m = probe_ranges(nobj, src, dev, 2 * k + 1, 2 * PROBE_ROUNDS, r, n);
		if (m < PROBE_MIN) {
			*tt = 0;
			break;
		}
		t = probe_time(fu, r, m);
		if (t < 0) { /* 2 s for n reads: io_uring is out, and no round more */
			*tu = -1;
			if (*tt == 0)
				*tt = th;
			break;
		}
		if (k > 0 && (*tu == 0 || t < *tu))
			*tu = t;
		/* a clear answer needs no more rounds */
		if (k > 0 && *tt > 0 && (*tu > 3 * *tt || *tu <= *tt))
			break;
	}
out:
	bfs_fetch_free(fu); /* one with reads stuck in the source stays behind */
	bfs_fetch_free(ft);
	free(r);
}

/* BFS_FETCH_AUTO (fetch.h): the backend for src, and why. */
static const struct bfs_fetch_backend_ops *choose(uint32_t nobj, const struct bfs_fetch_source *src,
						  const struct bfs_fetch_opts *o, char *why,
						  size_t len)
{
	uint64_t devs[PROBE_MAX_DEVS];
	size_t ndev = 0;

	if (!bfs_fetch_uring_ops) {
		snprintf(why, len, "threads: built without io_uring (liburing)");
		return &bfs_fetch_threads_ops;
	}
	snprintf(why, len, "io_uring: no object is on a FUSE filesystem");
	if (!src->dev)
		return bfs_fetch_uring_ops;
	for (uint32_t i = 0; i < nobj && ndev < PROBE_MAX_DEVS; i++) {
		uint64_t dev = src->dev(src->ctx, i);
		enum bfs_fetch_backend be;
		int64_t tu = 0, tt = 0;
		bool seen = false;
		long mb;
		int fd;

		for (size_t k = 0; k < ndev; k++)
			seen = seen || devs[k] == dev;
		if (!dev || seen)
			continue;
		devs[ndev++] = dev;
		if (src->pin(src->ctx, i, &fd) != 0)
			continue;
		mb = bfs_fetch_fuse_max_background(fd);
		src->unpin(src->ctx, i);
		if (mb == 0)
			continue;
		if (mb < 0 && src->size)
			probe_dev(nobj, src, dev, o->depth < PROBE_READS ? o->depth : PROBE_READS,
				  &tu, &tt);
		be = bfs_fetch_choose_fuse(mb, o->depth, tu, tt, why, len);
		if (be == BFS_FETCH_THREADS)
			return &bfs_fetch_threads_ops;
	}
	return bfs_fetch_uring_ops;
}

int bfs_fetch_new(struct bfs_fetch **out, uint32_t nobj, const struct bfs_fetch_source *src,
		  const struct bfs_fetch_opts *o)
{
	const struct bfs_fetch_backend_ops *be;
	char why[REASON_LEN];

	*out = NULL;
	if (!o->depth)
		return bfs_err_set(-EINVAL, "io_depth must be at least 1");
	if (o->backend == BFS_FETCH_CUSTOM ? !src->submit : !src->pin || !src->unpin)
		return bfs_err_set(-EINVAL, "the I/O stage has no way to read its source");
	if (o->align && !src->size)
		return bfs_err_set(-EINVAL, "aligned reads need the objects' sizes");
	switch (o->backend) {
	case BFS_FETCH_CUSTOM:
		be = &bfs_fetch_custom_ops;
		snprintf(why, sizeof(why), "custom: the source's own client");
		break;
	case BFS_FETCH_THREADS:
		be = &bfs_fetch_threads_ops;
		snprintf(why, sizeof(why), "threads: asked for");
		break;
	case BFS_FETCH_URING:
		if (!bfs_fetch_uring_ops)
			return bfs_err_set(-ENOSYS, "built without io_uring (liburing)");
		be = bfs_fetch_uring_ops;
		snprintf(why, sizeof(why), "io_uring: asked for");
		break;
	default:
		be = choose(nobj, src, o, why, sizeof(why));
		break;
	}
	return bfs_fetch_open(out, nobj, src, o, be, why);
}
