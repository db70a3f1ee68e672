/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fetch_impl.h — between the I/O stage (fetch.c) and its backends: how a
 * backend takes the next read and hands it back. Not for other users.
 */
#ifndef BFS_FETCH_IMPL_H
#define BFS_FETCH_IMPL_H

#include "fetch.h"

struct bfs_fetch_backend_ops {
	const char *name;
	/* start serving f's reads (threads of its own); 0 or -errno */
	int (*start)(struct bfs_fetch *f);
	/* reads were queued: wake the backend if it sleeps. Lock not held. */
	void (*kick)(struct bfs_fetch *f);
	/* a read ended (a place in flight is free); NULL: nothing to do.
	 * Lock not held. */
	void (*done)(struct bfs_fetch *f);
	/* f is stopping (bfs_fetch_stopping): end the threads; ones stuck in
	 * a source may be left behind. Called once, lock not held. */
	void (*stop)(struct bfs_fetch *f);
};

/* io_uring (fetch_uring.c; NULL ops when built without liburing). */
extern const struct bfs_fetch_backend_ops *const bfs_fetch_uring_ops;

/* The next read to issue, its buffer allocated and the read counted in
 * flight; NULL when f is stopping, or (block false) when none is queued. */
struct bfs_fetch_read *bfs_fetch_take(struct bfs_fetch *f, bool block);
bool bfs_fetch_stopping(struct bfs_fetch *f);
unsigned bfs_fetch_depth_of(struct bfs_fetch *f);
/* The backend's own state. */
void *bfs_fetch_backend_data(struct bfs_fetch *f);
void bfs_fetch_set_backend_data(struct bfs_fetch *f, void *data);
/* Pin / unpin the descriptor of r's object (descriptor backends). */
int bfs_fetch_read_pin(struct bfs_fetch *f, struct bfs_fetch_read *r, int *fd);
void bfs_fetch_read_unpin(struct bfs_fetch *f, struct bfs_fetch_read *r);
/* Bytes of r read so far (a short read continues from there). */
uint64_t bfs_fetch_read_progress(const struct bfs_fetch_read *r);
/* A part of r came in (n > 0 bytes at progress): true when r still needs
 * more (continue reading), false when it is complete (then
 * bfs_fetch_read_done was called). */
bool bfs_fetch_read_advance(struct bfs_fetch_read *r, uint64_t n);

#endif
