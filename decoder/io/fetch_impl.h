/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fetch_impl.h — the inside of the I/O stage, shared by its files and by
 * no one else: the stage's state, the backend interface (an ops table),
 * and what the core (fetch.c: queue, extents, tickets, copies) exports to
 * its backends (fetch_threads.c, fetch_uring.c, fetch_custom.c) and to
 * the probe (fetch_probe.c). The calls go one way: the backends and the
 * probe call the core; the core calls a backend only through its ops.
 */
#ifndef BFS_FETCH_IMPL_H
#define BFS_FETCH_IMPL_H

#include "fetch.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { X_PENDING, X_INFLIGHT, X_READY, X_FAILED };

#define REASON_LEN 320

struct bfs_fetch_read {
	struct bfs_fetch *f;
	uint64_t off, len;
	uint32_t obj;
	uint8_t state, tries;
	bool listed; /* in its object's list */
	bool unlist; /* lock: out of it at the end of the release underway */
	int err;
	char *msg; /* why it failed */
	uint32_t refs; /* tickets holding it */
	uint32_t users; /* copies outside the lock, waits */
	uint64_t prio, seq;
	size_t heap; /* position in the queue, or NOT_QUEUED */
	uint8_t *buf;
	uint64_t got; /* bytes read so far */
	uint64_t stamp; /* the last ticket that took it (one reference per ticket) */
	uint64_t t0; /* when it went in flight (the source's cost, bfs_fetch_cost) */
	/* a pass read (bfs_fetch_want_pass): a span read for the extents in it
	 * (its kids), which it fills and then goes; never listed, alive while
	 * a kid waits for it or it is in flight */
	bool pass;
	struct bfs_fetch_read **kids; /* [nkids], NULL where one went */
	size_t nkids, capkids, livekids;
	/* a kid: the pass read bringing its bytes (while PENDING) and its
	 * place among that read's kids; NULL: read on its own */
	struct bfs_fetch_read *via;
	size_t via_i;
	/* a kid filled: its bytes lie in the slab its pass read made for all
	 * its kids (one allocation for thousands of records), not in a buffer
	 * of its own */
	struct slab *slab;
};

/* The bytes of a pass read's kids, one allocation, freed with the last. */
struct slab {
	size_t refs;
	uint8_t data[];
};

struct objx {
	struct bfs_fetch_read **v;
	size_t n, cap;
	/* its pass reads not ended yet, by offset (they never overlap: each
	 * is one span a planner asked for; a later pass over the same span
	 * joins the one on its way) */
	struct bfs_fetch_read **pv;
	size_t pn, pcap;
};

struct bfs_fetch_ticket {
	uint64_t id;
	uint64_t prio;
	size_t n, cap;
	struct bfs_fetch_read **x;
};

struct bfs_fetch {
	struct bfs_fetch_opts o;
	struct bfs_fetch_source src;
	const struct bfs_fetch_backend_ops *be;
	char reason[REASON_LEN]; /* why be */
	void *be_data;
	bool be_started;
	uint32_t nobj;
	struct objx *objs; /* lock */
	pthread_mutex_t lock;
	pthread_cond_t done; /* a read ended, or stop */
	pthread_cond_t work; /* a read was queued, or stop */
	struct bfs_fetch_read **heap; /* lock; the queue */
	size_t nheap, capheap; /* lock */
	uint64_t seq, ticket_id; /* lock */
	uint64_t inflight_bytes; /* lock: bytes of the reads in flight */
	uint64_t pass_inflight; /* lock: of those, pass reads' */
	/* lock: what reads of the source cost, measured (bfs_fetch_cost): a
	 * small read's time (its latency), and a large one's bytes per
	 * second beyond that; 0 until measured */
	uint64_t lat_ns;
	double bw;
	bool stopping; /* lock */
	struct bfs_fetch_stats st; /* lock */
	/* lock: the low-water call (bfs_fetch_set_low) and calls running */
	void (*low_fn)(void *ctx);
	void *low_ctx;
	uint64_t low_at;
	unsigned in_low;
};

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

/* The backends: reader threads (fetch_threads.c), the source's own
 * client (fetch_custom.c), io_uring (fetch_uring.c; NULL ops when built
 * without liburing, fetch_nouring.c). */
extern const struct bfs_fetch_backend_ops bfs_fetch_threads_ops;
extern const struct bfs_fetch_backend_ops bfs_fetch_custom_ops;
extern const struct bfs_fetch_backend_ops *const bfs_fetch_uring_ops;

/* f with backend be (started), the rest of it as bfs_fetch_new says; when
 * AUTO picked a backend that cannot start, the reader threads. */
int bfs_fetch_open(struct bfs_fetch **out, uint32_t nobj, const struct bfs_fetch_source *src,
		   const struct bfs_fetch_opts *o, const struct bfs_fetch_backend_ops *be,
		   const char *reason);
/* Whether the next read must wait for bytes in flight to end. Lock held,
 * a read queued. */
bool bfs_fetch_bytes_full(const struct bfs_fetch *f);
/* bfs_fetch_take, entered with f->lock held; returns with it released. */
struct bfs_fetch_read *bfs_fetch_take_locked(struct bfs_fetch *f, bool block);
/* The end of read x (got bytes, or -errno and msg) under f->lock: x
 * READY, FAILED or queued again (true). */
bool bfs_fetch_complete_locked(struct bfs_fetch_read *x, int64_t got, const char *msg, bool local);

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
