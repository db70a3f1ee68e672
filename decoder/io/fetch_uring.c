/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fetch_uring.c — the I/O stage's io_uring backend: one thread keeps up to
 * `depth` reads of the stage in flight in one ring and completes them.
 *
 * The only file that includes <liburing.h>. A read the kernel cannot do
 * without blocking (a FUSE or network filesystem, a cold disk) runs on the
 * ring's kernel workers; their number is raised to the depth, so that
 * `depth` reads really wait at once. New work wakes the thread through a
 * read of an eventfd kept in the ring.
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
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#define WAKE_TAG ((uint64_t)1) /* user_data of the eventfd read (reads are pointers) */
#define JOIN_WAIT_NS 1000000000L

struct uring {
	struct io_uring ring;
	int efd;
	struct bfs_workers w; /* the ring's one thread: detached */
	unsigned inflight; /* reads in the ring; the thread's own */
	uint64_t wake_buf;
	struct bfs_fetch_read **redo; /* the thread's own: reads to submit again */
	unsigned nredo;
};

static void arm_wake(struct uring *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (!sqe)
		return;
	io_uring_prep_read(sqe, u->efd, &u->wake_buf, sizeof(u->wake_buf), 0);
	io_uring_sqe_set_data64(sqe, WAKE_TAG);
}

/* Put r (or what is left of it) in the ring; false when no entry is free
 * (the caller submits and tries again). A descriptor that cannot be
 * pinned ends the read. */
static bool put(struct bfs_fetch *f, struct uring *u, struct bfs_fetch_read *r)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	uint64_t off, len, at = bfs_fetch_read_progress(r);
	uint32_t obj;
	uint8_t *dst;
	int fd, err;

	if (!sqe)
		return false;
	err = bfs_fetch_read_pin(f, r, &fd);
	if (err) {
		/* nothing to read with: give the entry back as a no-op */
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, 0);
		u->inflight--;
		bfs_fetch_read_done(r, err, bfs_err_msg());
		return true;
	}
	bfs_fetch_read_target(r, &obj, &off, &dst, &len);
	io_uring_prep_read(sqe, fd, dst + at, (unsigned)(len - at), off + at);
	io_uring_sqe_set_data(sqe, r);
	return true;
}

/* One completion of a read: done, or (a part came, or EINTR/EAGAIN) again. */
static void reap(struct bfs_fetch *f, struct uring *u, struct bfs_fetch_read *r, int res)
{
	bfs_fetch_read_unpin(f, r);
	if (res == -EINTR || res == -EAGAIN ||
	    (res > 0 && bfs_fetch_read_advance(r, (uint64_t)res))) {
		u->redo[u->nredo++] = r;
		return;
	}
	u->inflight--;
	if (res < 0)
		bfs_fetch_read_done(r, res, NULL);
	else if (res == 0)
		bfs_fetch_read_done(r, (int64_t)bfs_fetch_read_progress(r), NULL);
	/* res > 0: bfs_fetch_read_advance completed it */
}

static void *loop(void *arg)
{
	struct bfs_fetch *f = arg;
	struct uring *u = bfs_fetch_backend_data(f);
	unsigned depth = bfs_fetch_depth_of(f);

	arm_wake(u);
	while (!bfs_fetch_stopping(f)) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;

		while (u->nredo && put(f, u, u->redo[u->nredo - 1]))
			u->nredo--;
		while (u->inflight < depth) {
			struct bfs_fetch_read *r = bfs_fetch_take(f, false);

			if (!r)
				break;
			u->inflight++;
			if (!put(f, u, r)) {
				u->redo[u->nredo++] = r;
				break;
			}
		}
		if (io_uring_submit_and_wait(&u->ring, 1) < 0 && errno != EINTR) {
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL); /* out of resources for a moment */
		}
		io_uring_for_each_cqe(&u->ring, head, cqe)
		{
			uint64_t tag = io_uring_cqe_get_data64(cqe);

			seen++;
			if (tag == WAKE_TAG)
				arm_wake(u);
			else if (tag != 0)
				reap(f, u, io_uring_cqe_get_data(cqe), cqe->res);
		}
		io_uring_cq_advance(&u->ring, seen);
	}
	bfs_workers_exit(&u->w);
	return NULL;
}

static void uring_free(struct uring *u)
{
	io_uring_queue_exit(&u->ring);
	close(u->efd);
	free(u->redo);
	free(u);
}

static int uring_start(struct bfs_fetch *f)
{
	unsigned depth = bfs_fetch_depth_of(f), workers[2] = { depth, depth };
	struct uring *u = calloc(1, sizeof(*u));
	int rc;

	if (!u)
		return -ENOMEM;
	u->efd = eventfd(0, EFD_CLOEXEC);
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
	u->redo = calloc(depth + 1, sizeof(*u->redo));
	if (u->efd < 0 || !u->redo) {
		rc = u->efd < 0 ? -errno : -ENOMEM;
		if (u->efd >= 0)
			close(u->efd);
		free(u->redo);
		free(u);
		return rc;
	}
	/* entries for every read in flight and the wake-up read */
	rc = io_uring_queue_init(depth + 1, &u->ring, 0);
	if (rc) {
		close(u->efd);
		free(u->redo);
		free(u);
		return bfs_err_set(rc, "io_uring: %s", strerror(-rc));
	}
	/* reads of a FUSE or network file block in the ring's workers: as
	 * many of them as reads in flight (best effort) */
	(void)io_uring_register_iowq_max_workers(&u->ring, workers);
	bfs_fetch_set_backend_data(f, u);
	rc = bfs_workers_start(&u->w, 1, loop, f, 0, true);
	if (rc) {
		bfs_fetch_set_backend_data(f, NULL);
		uring_free(u);
		return rc;
	}
	return 0;
}

static void uring_kick(struct bfs_fetch *f)
{
	struct uring *u = bfs_fetch_backend_data(f);
	uint64_t one = 1;

	if (u)
		(void)!write(u->efd, &one, sizeof(one));
}

static void uring_stop(struct bfs_fetch *f)
{
	struct uring *u = bfs_fetch_backend_data(f);

	if (!u)
		return;
	uring_kick(f);
	if (!bfs_workers_join(&u->w, JOIN_WAIT_NS))
		return; /* the thread is stuck: u stays, it still uses it */
	/* reads still in the ring are abandoned with it; their buffers stay */
	bfs_fetch_set_backend_data(f, u->inflight ? u : NULL);
	if (!u->inflight)
		uring_free(u);
}

static const struct bfs_fetch_backend_ops ops = {
	.name = "io_uring",
	.start = uring_start,
	.kick = uring_kick,
	.stop = uring_stop,
};

const struct bfs_fetch_backend_ops *const bfs_fetch_uring_ops = &ops;
