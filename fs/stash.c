/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stash.c — the small tensors of the epoch views (stash.h).
 */
#include "stash.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NENTRIES 4 /* (rank, epoch) entries held at once */

struct stash_tensor {
	uint8_t *buf; /* [nbytes of the epoch's tensor]; NULL: not small */
	uint64_t *held; /* bit per chunk: its part is in buf */
};

struct stash_entry {
	bool used;
	uint64_t rank, epoch, tick, bytes, nchunks;
	size_t ntensors;
	struct stash_tensor *t; /* [ntensors] */
};

struct bfs_stash {
	pthread_mutex_t m;
	uint64_t budget, bytes, tick;
	struct stash_entry e[NENTRIES];
};

int bfs_stash_new(struct bfs_stash **out, uint64_t budget)
{
	struct bfs_stash *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return -ENOMEM;
	if (pthread_mutex_init(&s->m, NULL)) {
		free(s);
		return -ENOMEM;
	}
	s->budget = budget;
	*out = s;
	return 0;
}

static void entry_clear(struct bfs_stash *s, struct stash_entry *e)
{
	for (size_t t = 0; e->t && t < e->ntensors; t++) {
		free(e->t[t].buf);
		free(e->t[t].held);
	}
	free(e->t);
	s->bytes -= e->bytes;
	memset(e, 0, sizeof(*e));
}

void bfs_stash_free(struct bfs_stash *s)
{
	if (!s)
		return;
	for (int i = 0; i < NENTRIES; i++)
		entry_clear(s, &s->e[i]);
	pthread_mutex_destroy(&s->m);
	free(s);
}

static struct stash_entry *find(struct bfs_stash *s, uint64_t rank, uint64_t epoch)
{
	for (int i = 0; i < NENTRIES; i++)
		if (s->e[i].used && s->e[i].rank == rank && s->e[i].epoch == epoch)
			return &s->e[i];
	return NULL;
}

/* The tensors of v to keep, and their bytes (0: none, or all of them). */
static uint64_t choose(const struct bfs_stash *s, const struct bfs_epoch_view *v, bool *pick)
{
	const struct bfs_geom *g = v->geom;
	uint64_t sum = 0, total = 0;
	size_t n = 0;

	for (size_t t = 0; t < g->ntensors; t++)
		total += g->g[t].nbytes;
	for (size_t t = 0; t < g->ntensors; t++) {
		uint64_t nb = g->g[t].nbytes;
		/* small: a quarter of the budget, or, up to the whole budget, an
		 * eighth of the epoch's bytes (a label beside a big column of a
		 * large epoch: 'small' at 6.4M records is y 51 MB beside x 819 MB) */
		bool small = nb <= s->budget / 4 || (nb <= s->budget && nb <= total / 8);
		pick[t] = nb > 0 && small && sum + nb <= s->budget;
		if (pick[t]) {
			sum += nb;
			n++;
		}
	}
	return n == g->ntensors ? 0 : sum;
}

/* A new entry for (rank, epoch), the least recently used ones out to make
 * room; NULL when nothing is worth keeping or without memory. */
static struct stash_entry *entry_new(struct bfs_stash *s, const struct bfs_epoch_view *v,
				     uint64_t rank, uint64_t epoch)
{
	const struct bfs_geom *g = v->geom;
	struct stash_entry *e = NULL;
	bool *pick = calloc(g->ntensors ? g->ntensors : 1, sizeof(*pick));
	uint64_t sum = pick ? choose(s, v, pick) : 0;

	if (sum == 0 || v->nchunks == 0)
		goto done;
	for (;;) { /* a free entry, and room */
		struct stash_entry *old = NULL;
		for (int i = 0; i < NENTRIES; i++) {
			if (!s->e[i].used && !e)
				e = &s->e[i];
			if (s->e[i].used && (!old || s->e[i].tick < old->tick))
				old = &s->e[i];
		}
		if (e && s->bytes + sum <= s->budget)
			break;
		if (!old)
			goto done; /* cannot happen: sum <= budget */
		entry_clear(s, old);
		e = NULL;
	}
	e->t = calloc(g->ntensors, sizeof(*e->t));
	if (!e->t)
		goto fail;
	e->ntensors = g->ntensors;
	e->nchunks = v->nchunks;
	for (size_t t = 0; t < g->ntensors; t++) {
		if (!pick[t])
			continue;
		e->t[t].buf = malloc(g->g[t].nbytes);
		e->t[t].held = calloc((v->nchunks + 63) / 64, sizeof(uint64_t));
		if (!e->t[t].buf || !e->t[t].held)
			goto fail;
	}
	e->used = true;
	e->rank = rank;
	e->epoch = epoch;
	e->bytes = sum;
	s->bytes += sum;
	goto done;
fail:
	entry_clear(s, e); /* e->bytes is 0: s->bytes unchanged */
	e = NULL;
done:
	free(pick);
	return e;
}

static bool held(const struct stash_tensor *st, uint64_t c)
{
	return (st->held[c / 64] >> (c % 64)) & 1;
}

void bfs_stash_fill(struct bfs_stash *s, const struct bfs_epoch_view *v, uint64_t rank,
		    uint64_t epoch, uint64_t c, const uint8_t *cbuf, const struct bfs_geom *cg)
{
	struct stash_entry *e;

	if (!s || s->budget == 0 || c >= v->nchunks)
		return;
	pthread_mutex_lock(&s->m);
	e = find(s, rank, epoch);
	if (!e)
		e = entry_new(s, v, rank, epoch);
	if (e && e->nchunks == v->nchunks && e->ntensors == cg->ntensors) {
		e->tick = ++s->tick;
		for (size_t t = 0; t < e->ntensors; t++) {
			struct stash_tensor *st = &e->t[t];
			uint64_t lo, hi, base;

			if (!st->buf || held(st, c))
				continue;
			bfs_epoch_view_span(v, t, c, &lo, &hi, &base);
			if (hi > lo && bfs_epoch_view_copy(v, t, c, cbuf, cg, lo, hi - lo,
							   st->buf + lo) != hi - lo)
				continue; /* the chunk disagrees: the chunk path reports it */
			st->held[c / 64] |= (uint64_t)1 << (c % 64);
		}
	}
	pthread_mutex_unlock(&s->m);
}

uint64_t bfs_stash_read(struct bfs_stash *s, const struct bfs_epoch_view *v, uint64_t rank,
			uint64_t epoch, size_t t, uint64_t c, uint64_t off, uint64_t n,
			uint8_t *dst)
{
	struct stash_entry *e;
	uint64_t got = 0;

	if (!s || s->budget == 0 || c >= v->nchunks || n == 0)
		return 0;
	pthread_mutex_lock(&s->m);
	e = find(s, rank, epoch);
	if (e && e->nchunks == v->nchunks && t < e->ntensors && e->t[t].buf && held(&e->t[t], c)) {
		uint64_t lo, hi, base;

		bfs_epoch_view_span(v, t, c, &lo, &hi, &base);
		if (off >= lo && off < hi) {
			got = off + n < hi ? n : hi - off;
			memcpy(dst, e->t[t].buf + off, got);
			e->tick = ++s->tick;
		}
	}
	pthread_mutex_unlock(&s->m);
	return got;
}

uint64_t bfs_stash_bytes(struct bfs_stash *s)
{
	uint64_t b;

	pthread_mutex_lock(&s->m);
	b = s->bytes;
	pthread_mutex_unlock(&s->m);
	return b;
}
