/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dynfiles.c — which snapshot of stats.json or errors.txt each reader sees
 * (see dynfiles.h): the readers remembered, their snapshots, and the
 * padding that keeps two readers from finding each other's end.
 */
#include "dynfiles.h"

#include "common.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NFILES 2 /* stats.json, errors.txt */
#define READERS 64 /* readers remembered */
#define TOUCHES 256 /* per-reader counts of other reads (hashed by thread id) */
#define ACTIVE_MS 50 /* a reader reads on (the size it saw holds) this long */
#define SHARE_MS 1000 /* a snapshot shared with later readers at most this old */

/* A reader of a file: the snapshot its last size or read was of. */
struct dyn_reader {
	uint64_t tid; /* 0: a free slot */
	unsigned k;
	struct bfs_snapshot *snap; /* a reference */
	uint64_t gen;
	uint64_t at_ns; /* its last size or read (bfs_now_ns) */
	uint64_t made_ns; /* when snap was made */
	uint64_t touch; /* touches[] then: the reader's reads of other files */
};

struct bfs_dynfiles {
	bfs_dynfiles_text_fn text;
	void *ctx;
	struct bfs_snapshot_set *set; /* their current snapshots */
	pthread_mutex_t lock; /* guards readers, next_reader, reported, pad */
	struct dyn_reader readers[READERS];
	unsigned next_reader;
	/* the snapshot each file was last sized at, for unknown readers */
	struct bfs_snapshot *reported[NFILES];
	size_t pad[NFILES]; /* the next snapshot padded to this (0: none) */
	uint64_t touches[TOUCHES]; /* atomic */
};

/* The set's make function (under the lock: d->pad). */
static char *make(void *arg, unsigned k, size_t *len)
{
	struct bfs_dynfiles *d = arg;

	return d->text(d->ctx, (enum bfs_dynfile)k, d->pad[k], len);
}

int bfs_dynfiles_new(struct bfs_dynfiles **out, bfs_dynfiles_text_fn text, void *ctx)
{
	struct bfs_dynfiles *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->text = text;
	d->ctx = ctx;
	if (bfs_snapshot_set_new(&d->set, NFILES, make, d) != 0) {
		free(d);
		return -ENOMEM;
	}
	pthread_mutex_init(&d->lock, NULL);
	*out = d;
	return 0;
}

void bfs_dynfiles_free(struct bfs_dynfiles *d)
{
	if (!d)
		return;
	for (unsigned i = 0; i < READERS; i++)
		bfs_snapshot_put(d->readers[i].snap);
	for (unsigned k = 0; k < NFILES; k++)
		bfs_snapshot_put(d->reported[k]);
	pthread_mutex_destroy(&d->lock);
	bfs_snapshot_set_free(d->set);
	free(d);
}

int bfs_dynfiles_open(struct bfs_dynfiles *d, enum bfs_dynfile k, struct bfs_snapshot **out)
{
	size_t len = 0;
	char *text = d->text(d->ctx, k, 0, &len);

	*out = text ? bfs_snapshot_new(text, len) : NULL;
	return *out ? 0 : -ENOMEM;
}

static uint64_t touches(struct bfs_dynfiles *d, uint64_t tid)
{
	return __atomic_load_n(&d->touches[tid % TOUCHES], __ATOMIC_RELAXED);
}

void bfs_dynfiles_touch(struct bfs_dynfiles *d, uint64_t tid)
{
	if (tid)
		__atomic_add_fetch(&d->touches[tid % TOUCHES], 1, __ATOMIC_RELAXED);
}

/* Reader tid's slot for file k (under the lock); NULL when none and !make
 * (else the least recently used slot, taken over). */
static struct dyn_reader *dyn_reader(struct bfs_dynfiles *d, uint64_t tid, unsigned k, bool make)
{
	struct dyn_reader *r;

	for (unsigned i = 0; i < READERS; i++)
		if (d->readers[i].tid == tid && d->readers[i].k == k)
			return &d->readers[i];
	if (!make)
		return NULL;
	r = &d->readers[d->next_reader++ % READERS];
	bfs_snapshot_put(r->snap);
	memset(r, 0, sizeof(*r));
	r->tid = tid;
	r->k = k;
	return r;
}

static void set_reported(struct bfs_dynfiles *d, unsigned k, struct bfs_snapshot *s)
{
	bfs_snapshot_get(s);
	bfs_snapshot_put(d->reported[k]);
	d->reported[k] = s;
}

/* A fresh snapshot of file k for reader tid (a reference; under the lock).
 * While another reader reads one (its last size or read within
 * ACTIVE_MS), the kernel's one size of the file is that snapshot's: the
 * fresh text is padded with spaces to it, or, longer, that snapshot is
 * shared, so that neither reader finds the other's end. */
static struct bfs_snapshot *fresh(struct bfs_dynfiles *d, unsigned k, uint64_t tid, uint64_t now,
				  uint64_t *gen, uint64_t *made)
{
	struct dyn_reader *act = NULL;
	struct bfs_snapshot *s;

	for (unsigned i = 0; i < READERS; i++) {
		struct dyn_reader *r = &d->readers[i];

		if (r->tid && r->tid != tid && r->k == k && r->snap &&
		    now - r->at_ns < (uint64_t)ACTIVE_MS * 1000000u &&
		    (!act || r->at_ns > act->at_ns))
			act = r;
	}
	*made = now;
	if (!act)
		return bfs_snapshot_refresh(d->set, k, gen);
	d->pad[k] = act->snap->len;
	s = bfs_snapshot_refresh(d->set, k, gen);
	d->pad[k] = 0;
	/* longer: theirs, unless it is old (then this reader's, at its size) */
	if (s && s->len != act->snap->len && now - act->made_ns < (uint64_t)SHARE_MS * 1000000u) {
		bfs_snapshot_put(s);
		s = act->snap;
		bfs_snapshot_get(s);
		*gen = act->gen;
		*made = act->made_ns;
	}
	return s;
}

int bfs_dynfiles_size(struct bfs_dynfiles *d, enum bfs_dynfile k, uint64_t tid, bool reading,
		      uint64_t *size, uint64_t *gen_out)
{
	uint64_t now, gen = 0;
	struct bfs_snapshot *s = NULL;
	struct dyn_reader *r;

	pthread_mutex_lock(&d->lock);
	now = bfs_now_ns(); /* under the lock: no slot's time is later */
	r = tid ? dyn_reader(d, tid, k, false) : NULL;
	if (r && r->snap && reading &&
	    now - r->at_ns < (uint64_t)BFS_DYNFILES_CONTINUE_MS * 1000000u &&
	    r->touch == touches(d, tid)) {
		/* the same reader reading on: the snapshot it reads */
		s = r->snap;
		bfs_snapshot_get(s);
		gen = r->gen;
	} else {
		uint64_t made = now;

		s = fresh(d, k, tid, now, &gen, &made);
		if (s && tid) {
			r = dyn_reader(d, tid, k, true);
			bfs_snapshot_get(s);
			bfs_snapshot_put(r->snap); /* its older one */
			r->snap = s;
			r->gen = gen;
			r->made_ns = made;
			r->touch = touches(d, tid);
		}
	}
	if (s) {
		if (r)
			r->at_ns = now;
		set_reported(d, k, s);
	}
	pthread_mutex_unlock(&d->lock);
	if (!s)
		return -ENOMEM;
	*size = s->len;
	if (gen_out)
		*gen_out = gen;
	bfs_snapshot_put(s);
	return 0;
}

struct bfs_snapshot *bfs_dynfiles_read(struct bfs_dynfiles *d, enum bfs_dynfile k, uint64_t tid)
{
	struct bfs_snapshot *s;
	struct dyn_reader *r;

	pthread_mutex_lock(&d->lock);
	r = tid ? dyn_reader(d, tid, k, false) : NULL;
	s = r && r->snap ? r->snap : d->reported[k];
	if (s)
		bfs_snapshot_get(s);
	else /* never sized: the kernel has no size of it */
		s = bfs_snapshot_current(d->set, k);
	if (r)
		r->at_ns = bfs_now_ns();
	pthread_mutex_unlock(&d->lock);
	return s;
}
