/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fetch_custom.c — the I/O stage's backend for a source with a client of
 * its own (BFS_FETCH_CUSTOM): reads are handed to the source's submit,
 * which ends each with bfs_fetch_read_done.
 */
#include "fetch_impl.h"

#include <pthread.h>

static void custom_kick(struct bfs_fetch *f);

const struct bfs_fetch_backend_ops bfs_fetch_custom_ops = {
	.name = "custom",
	.start = NULL,
	.kick = custom_kick,
	.done = custom_kick,
	.stop = NULL,
};

/* A custom source takes reads as long as fewer than depth are in flight. */
static void custom_kick(struct bfs_fetch *f)
{
	for (;;) {
		struct bfs_fetch_read *r;

		pthread_mutex_lock(&f->lock);
		bool room = f->st.inflight < f->o.depth && f->nheap && !bfs_fetch_bytes_full(f) &&
			    !f->stopping;
		pthread_mutex_unlock(&f->lock);
		if (!room || !(r = bfs_fetch_take(f, false)))
			return;
		f->src.submit(f->src.ctx, r);
	}
}
