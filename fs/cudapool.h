/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cudapool.h — who holds which device buffer of the CUDA path's pool
 * (cudapath.h), and the opens of batch-B.cuda that wait for one.
 *
 * An open takes a free buffer, or fails at once (O_NONBLOCK: EAGAIN,
 * docs/contract.md), or waits in a queue without holding a thread: a buffer
 * given back goes straight to the oldest waiter, which the caller then
 * serves. A waiter whose opener gave up (a signal) is taken back out.
 *
 * Does not: call CUDA (cudapath.h), or know FUSE requests: a waiter is the
 * caller's, embedded in its own struct and found again by its tag.
 * Thread-safety: every function may be called from any thread; one mutex
 * guards the buffers, the queue and the counters.
 */
#ifndef BFS_CUDAPOOL_H
#define BFS_CUDAPOOL_H

#include <stdbool.h>
#include <stdint.h>

struct bfs_cudapool;

struct bfs_cudapool_waiter {
	const void *tag; /* the caller's: what bfs_cudapool_cancel looks for */
	struct bfs_cudapool_waiter *next; /* private: the queue, under the pool's lock */
};

struct bfs_cudapool_stats {
	unsigned pool, busy; /* buffers, and those an open descriptor holds */
	uint64_t opens; /* opens answered with a buffer */
	uint64_t waits; /* opens that waited for one */
	uint64_t eagain; /* O_NONBLOCK opens that found none */
	uint64_t errors; /* copies, waits and opens that failed */
};

/* n buffers, all free (n >= 1). -ENOMEM. */
int bfs_cudapool_new(struct bfs_cudapool **out, unsigned n);
void bfs_cudapool_free(struct bfs_cudapool *p); /* accepts NULL; nobody may wait */

/* A buffer for w's open: returns its slot (>= 0). With none free: -EAGAIN
 * when nonblock (counted); -EINTR when gone(w->tag) says the opener gave up
 * already (asked under the lock, so that a cancel is never lost between the
 * check and the queue); else w joins the queue (counted as a wait) and
 * -EINPROGRESS: w then gets a slot from bfs_cudapool_put, or is taken back
 * by bfs_cudapool_cancel. w must stay valid while it waits. */
int bfs_cudapool_take(struct bfs_cudapool *p, struct bfs_cudapool_waiter *w, bool nonblock,
		      bool (*gone)(const void *tag));

/* Slot given back: returns the oldest waiter, out of the queue and now the
 * slot's owner (the caller serves it), or NULL when the slot is free. */
struct bfs_cudapool_waiter *bfs_cudapool_put(struct bfs_cudapool *p, unsigned slot);

/* The waiter tagged `tag`, out of the queue; NULL when none waits (it got
 * a slot, or never waited). */
struct bfs_cudapool_waiter *bfs_cudapool_cancel(struct bfs_cudapool *p, const void *tag);

void bfs_cudapool_opened(struct bfs_cudapool *p); /* an open answered (opens) */
void bfs_cudapool_failed(struct bfs_cudapool *p); /* a copy, wait or open failed (errors) */
void bfs_cudapool_stats(struct bfs_cudapool *p, struct bfs_cudapool_stats *out);

#endif
