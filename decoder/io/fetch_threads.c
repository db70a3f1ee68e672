/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fetch_threads.c — the I/O stage's reader-thread backend: depth threads,
 * each taking the next read from the stage's queue (fetch.c) and reading
 * it with pread(2) from the descriptor the source pins.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fetch_impl.h"

#include "common.h"
#include "workers.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define READER_STACK ((size_t)128 << 10)
#define JOIN_WAIT_NS 1000000000L /* a reader stuck in a source is left behind */

struct threads {
	struct bfs_workers w; /* the readers: detached */
};

/* Read r from its descriptor: the bytes read, or a negative errno (*msg
 * then says why, when it is more than the errno). */
static int64_t read_fd(struct bfs_fetch *f, struct bfs_fetch_read *r, const char **msg)
{
	int fd, err = bfs_fetch_read_pin(f, r, &fd);
	uint64_t at = r->got;
	int64_t result;

	*msg = NULL;
	if (err) {
		*msg = bfs_err_msg();
		return err;
	}
	for (;;) {
		ssize_t n = pread(fd, r->buf + at, (size_t)(r->len - at), (off_t)(r->off + at));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			result = n < 0 ? -errno : (int64_t)at;
			break;
		}
		at += (uint64_t)n;
		if (at == r->len) {
			result = (int64_t)at;
			break;
		}
	}
	/* unpinned first: once done, r may be freed at once */
	bfs_fetch_read_unpin(f, r);
	return result;
}

/* A reader thread: a read ends and the next is taken under one hold of
 * the stage's lock (256 threads contend for it). */
static void *reader(void *arg)
{
	struct bfs_fetch *f = arg;
	struct threads *t = f->be_data;
	struct bfs_fetch_read *r = bfs_fetch_take(f, true);

	while (r) {
		const char *msg;
		int64_t got = read_fd(f, r, &msg);

		if (got >= 0 && (uint64_t)got == r->len && f->src.fetched)
			f->src.fetched(f->src.ctx, r->obj, r->off, r->buf, r->len);
		pthread_mutex_lock(&f->lock);
		(void)bfs_fetch_complete_locked(r, got, msg,
						false); /* a read queued again: taken below */
		r = bfs_fetch_take_locked(f, true);
	}
	bfs_workers_exit(&t->w);
	return NULL;
}

static int threads_start(struct bfs_fetch *f)
{
	struct threads *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	f->be_data = t;
	rc = bfs_workers_start(&t->w, f->o.depth, reader, f, READER_STACK, true);
	if (rc) {
		/* none started: nothing uses t */
		f->be_data = NULL;
		free(t);
		return rc == -ENOMEM ? rc : -EAGAIN;
	}
	return 0;
}

static void threads_stop(struct bfs_fetch *f)
{
	struct threads *t = f->be_data;

	if (!t)
		return;
	/* the readers are detached: wait a bounded time for them to see the
	 * stop; one stuck in a hung source is left behind with its state */
	if (!bfs_workers_join(&t->w, JOIN_WAIT_NS))
		return; /* f stays: a reader stuck in a source still uses it */
	free(t);
	f->be_data = NULL;
}

const struct bfs_fetch_backend_ops bfs_fetch_threads_ops = {
	.name = "threads",
	.start = threads_start,
	.kick = NULL, /* the readers wait on f->work */
	.stop = threads_stop,
};
