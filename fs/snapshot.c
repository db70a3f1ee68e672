/* SPDX-License-Identifier: Apache-2.0 */
/*
 * snapshot.c — the changing files' snapshots (see snapshot.h).
 */
#include "snapshot.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct bfs_snapshot_set {
	bfs_snapshot_fn make;
	void *ctx;
	unsigned n;
	pthread_mutex_t lock; /* guards cur and gen */
	struct bfs_snapshot **cur; /* [n]: each file's current one, or NULL */
	uint64_t gen; /* of the last snapshot made current */
};

int bfs_snapshot_set_new(struct bfs_snapshot_set **out, unsigned nfiles, bfs_snapshot_fn make,
			 void *ctx)
{
	struct bfs_snapshot_set *set = calloc(1, sizeof(*set));

	if (!set)
		return -ENOMEM;
	set->cur = calloc(nfiles ? nfiles : 1, sizeof(*set->cur));
	if (!set->cur) {
		free(set);
		return -ENOMEM;
	}
	set->make = make;
	set->ctx = ctx;
	set->n = nfiles;
	pthread_mutex_init(&set->lock, NULL);
	*out = set;
	return 0;
}

void bfs_snapshot_set_free(struct bfs_snapshot_set *set)
{
	if (!set)
		return;
	for (unsigned k = 0; k < set->n; k++)
		bfs_snapshot_put(set->cur[k]);
	pthread_mutex_destroy(&set->lock);
	free(set->cur);
	free(set);
}

struct bfs_snapshot *bfs_snapshot_new(char *text, size_t len)
{
	struct bfs_snapshot *s = calloc(1, sizeof(*s));

	if (!s) {
		free(text);
		return NULL;
	}
	s->text = text;
	s->len = len;
	s->refs = 1;
	return s;
}

void bfs_snapshot_get(struct bfs_snapshot *s)
{
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
}

void bfs_snapshot_put(struct bfs_snapshot *s)
{
	if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		free(s->text);
		free(s);
	}
}

struct bfs_snapshot *bfs_snapshot_refresh(struct bfs_snapshot_set *set, unsigned k, uint64_t *gen)
{
	struct bfs_snapshot *s, *old;
	size_t len = 0;
	char *text;

	/* made outside the lock: stats.json reads every module's counters */
	text = set->make(set->ctx, k, &len);
	if (!text)
		return NULL;
	s = bfs_snapshot_new(text, len);
	if (!s)
		return NULL;
	s->refs = 2; /* the set's and the caller's */
	pthread_mutex_lock(&set->lock);
	old = set->cur[k];
	set->cur[k] = s;
	*gen = ++set->gen;
	pthread_mutex_unlock(&set->lock);
	bfs_snapshot_put(old);
	return s;
}

struct bfs_snapshot *bfs_snapshot_current(struct bfs_snapshot_set *set, unsigned k)
{
	struct bfs_snapshot *s;
	uint64_t gen;

	pthread_mutex_lock(&set->lock);
	s = set->cur[k];
	if (s)
		bfs_snapshot_get(s);
	pthread_mutex_unlock(&set->lock);
	return s ? s : bfs_snapshot_refresh(set, k, &gen);
}
