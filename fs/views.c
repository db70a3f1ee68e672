/* SPDX-License-Identifier: Apache-2.0 */
/*
 * views.c — the epoch views, least recently used out first (see views.h).
 */
#include "views.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct slot {
	uint64_t rank, key, used;
	struct bfs_view_ref *r; /* NULL: empty */
};

struct bfs_views {
	const struct bfs_batcher *const *b;
	size_t nranks;
	bool same; /* no ragged tensor: one view per rank, whatever the epoch */
	unsigned keep;
	pthread_mutex_t lock; /* guards slots, tick and every refs */
	struct slot *slots; /* [keep] */
	uint64_t tick;
};

int bfs_views_new(struct bfs_views **out, const struct bfs_batcher *const *b, size_t nranks,
		  unsigned keep)
{
	struct bfs_views *vs = calloc(1, sizeof(*vs));

	if (!vs)
		return -ENOMEM;
	vs->keep = keep ? keep : 1;
	vs->slots = calloc(vs->keep, sizeof(*vs->slots));
	if (!vs->slots) {
		free(vs);
		return -ENOMEM;
	}
	vs->b = b;
	vs->nranks = nranks;
	vs->same = bfs_batcher_plan(b[0])->nslots == 0;
	pthread_mutex_init(&vs->lock, NULL);
	*out = vs;
	return 0;
}

static void ref_free(struct bfs_view_ref *r)
{
	bfs_epoch_view_free(r->v);
	free(r);
}

void bfs_views_free(struct bfs_views *vs)
{
	if (!vs)
		return;
	for (unsigned i = 0; i < vs->keep; i++)
		if (vs->slots[i].r)
			ref_free(vs->slots[i].r);
	pthread_mutex_destroy(&vs->lock);
	free(vs->slots);
	free(vs);
}

void bfs_views_put(struct bfs_views *vs, struct bfs_view_ref *r)
{
	bool last;

	if (!r)
		return;
	pthread_mutex_lock(&vs->lock);
	last = --r->refs == 0;
	pthread_mutex_unlock(&vs->lock);
	if (last)
		ref_free(r);
}

/* Lock held: the slot holding (rank, key), or NULL. */
static struct slot *lookup(struct bfs_views *vs, uint64_t rank, uint64_t key)
{
	for (unsigned i = 0; i < vs->keep; i++)
		if (vs->slots[i].r && vs->slots[i].key == key && vs->slots[i].rank == rank)
			return &vs->slots[i];
	return NULL;
}

/* Lock held: r's slot was used now; a reference for the caller. */
static struct bfs_view_ref *take(struct bfs_views *vs, struct slot *s)
{
	s->used = ++vs->tick;
	s->r->refs++;
	return s->r;
}

int bfs_views_get(struct bfs_view_ref **out, struct bfs_views *vs, uint64_t rank, uint64_t epoch)
{
	uint64_t key = vs->same ? 0 : epoch;
	struct bfs_view_ref *r, *drop = NULL;
	struct bfs_epoch_view *v = NULL;
	struct slot *s, *lru;
	int rc;

	pthread_mutex_lock(&vs->lock);
	s = lookup(vs, rank, key);
	r = s ? take(vs, s) : NULL;
	pthread_mutex_unlock(&vs->lock);
	if (r) {
		*out = r;
		return 0;
	}
	/* made outside the lock: a pass over the epoch's permutation */
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	rc = bfs_epoch_view_new(&v, vs->b[rank], key);
	if (rc) {
		free(r);
		return rc;
	}
	r->v = v;
	pthread_mutex_lock(&vs->lock);
	s = lookup(vs, rank, key);
	if (s) { /* made meanwhile by another reader: take that one */
		drop = r;
		r = take(vs, s);
	} else {
		lru = &vs->slots[0];
		for (unsigned i = 0; i < vs->keep && lru->r; i++)
			if (!vs->slots[i].r || vs->slots[i].used < lru->used)
				lru = &vs->slots[i];
		if (lru->r && --lru->r->refs == 0)
			drop = lru->r;
		lru->r = r;
		lru->rank = rank;
		lru->key = key;
		lru->used = ++vs->tick;
		r->refs = 2; /* the table's and the caller's */
	}
	pthread_mutex_unlock(&vs->lock);
	if (drop)
		ref_free(drop);
	*out = r;
	return 0;
}
