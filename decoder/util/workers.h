/* SPDX-License-Identifier: Apache-2.0 */
/*
 * workers.h — the life of a pool of helper threads, the same for the
 * decoder cache's workers (fs/cache.c), the disk cache's writer
 * (io/diskcache.c) and the I/O stage's readers (io/fetch_threads.c): started
 * together with the stop signals blocked (bfs_thread_start_attr), told to
 * stop under their owner's lock, then joined; or, for detached threads
 * that a hung source may hold, waited for a bounded time and left behind.
 *
 * The owner keeps its own lock, stop flag and conditions (its threads'
 * loops read them); struct bfs_workers keeps the threads. Not
 * thread-safe itself: one thread starts and joins a pool; detached
 * workers call bfs_workers_exit as they end.
 */
#ifndef BFS_WORKERS_H
#define BFS_WORKERS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bfs_workers {
	pthread_t *tid; /* [n] */
	unsigned n; /* started */
	bool detached;
	/* detached pools: the threads still running, and their end */
	pthread_mutex_t lock;
	pthread_cond_t gone;
	unsigned running; /* lock */
};

/* Start up to `n` threads running fn(arg) into w (its old content is
 * overwritten), each with `stack` bytes of stack (0: the default);
 * detached: not joined (each must call bfs_workers_exit as it ends).
 * Stops at the first that fails to start. 0 when one or more started
 * (w->n of them); else w is left zeroed (a join does nothing) and the
 * result is -ENOMEM, or pthread_create's error negated (-EAGAIN; also
 * for n == 0). */
int bfs_workers_start(struct bfs_workers *w, unsigned n, void *(*fn)(void *), void *arg,
		      size_t stack, bool detached);

/* Tell the owner's threads to stop: under `lock`, *stop = true and each of
 * wake and also (when not NULL) broadcast, so that a thread waiting on it
 * sees the flag. */
void bfs_workers_stop(pthread_mutex_t *lock, bool *stop, pthread_cond_t *wake,
		      pthread_cond_t *also);

/* A detached worker's last call before it returns: counted out. */
void bfs_workers_exit(struct bfs_workers *w);

/* Wait for the threads of w to end, once they were told to stop: each
 * joined; detached ones, up to wait_ns for all of them to call
 * bfs_workers_exit. true when all ended (w's memory is freed and w zeroed:
 * it may start again); false when a detached one still runs (w is left as
 * it is: that thread still uses it, and its owner's state). */
bool bfs_workers_join(struct bfs_workers *w, uint64_t wait_ns);

#endif
