/* SPDX-License-Identifier: Apache-2.0 */
/*
 * blockshuf.c — the block cut and the per-epoch block order (see
 * blockshuf.h; the algorithm is docs/shuffle.md, section 5).
 */
#include "blockshuf.h"

#include "feistel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define GOLDEN 0x9E3779B97F4A7C15ull
#define BLOCKS_TAG 0x626C6F636B73ull /* "blocks" */
#define FRAMING 16u /* length, its CRC, the data's CRC */
#define RECENT 4 /* epoch orders kept */

struct bfs_blocks {
	uint64_t nrecords, nblocks, cap, window;
	uint64_t seed_b; /* keys the block permutation; groups derive theirs */
	uint64_t *start; /* [nblocks + 1] */
	uint64_t block_size, open_bytes; /* while cutting */
	pthread_mutex_t lock;
	struct bfs_block_order *recent[RECENT]; /* most recently made first */
};

struct bfs_block_order {
	atomic_uint refs;
	uint64_t epoch;
	const struct bfs_blocks *bl;
	uint64_t ngroups;
	uint64_t *blk; /* [nblocks]: the block at each position of the sequence */
	uint64_t *cum; /* [nblocks + 1]: the epoch position where each starts */
};

static int push_start(struct bfs_blocks *bl, uint64_t rec)
{
	if (bl->nblocks + 1 >= bl->cap) {
		uint64_t cap = bl->cap ? bl->cap * 2 : 64;
		uint64_t *s = realloc(bl->start, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		bl->start = s;
		bl->cap = cap;
	}
	bl->start[bl->nblocks++] = rec;
	bl->open_bytes = 0;
	return 0;
}

/* Record `rec` of `len` data bytes, the first of its shard or not. */
static int cut_one(struct bfs_blocks *bl, uint64_t rec, uint32_t len, bool first_of_shard)
{
	uint64_t bytes = (uint64_t)len + FRAMING;

	if (bl->nblocks == 0 || first_of_shard || bl->open_bytes + bytes > bl->block_size) {
		int rc = push_start(bl, rec);
		if (rc)
			return rc;
	}
	bl->open_bytes += bytes;
	return 0;
}

static int begin(struct bfs_blocks **out, uint64_t block_size, uint64_t window, uint64_t seed)
{
	struct bfs_blocks *bl;

	*out = NULL;
	if (block_size == 0)
		return bfs_err_set(-EINVAL, "block_size must be at least 1 byte");
	if (window == 0)
		return bfs_err_set(-EINVAL, "window must be at least 1 block");
	bl = calloc(1, sizeof(*bl));
	if (!bl)
		return -ENOMEM;
	bl->block_size = block_size;
	bl->window = window;
	bl->seed_b = bfs_mix64(seed ^ BLOCKS_TAG);
	pthread_mutex_init(&bl->lock, NULL);
	*out = bl;
	return 0;
}

static int finish(struct bfs_blocks *bl, uint64_t n)
{
	int rc;

	bl->nrecords = n;
	rc = push_start(bl, n); /* the end sentinel (not a block) */
	if (rc)
		return rc;
	bl->nblocks--;
	return 0;
}

/* The end of a constructor: finish the last block over r records, or free
 * bl on failure (rc, or finish's). */
static int conclude(struct bfs_blocks *bl, uint64_t r, int rc, struct bfs_blocks **out)
{
	if (!rc)
		rc = finish(bl, r);
	if (rc) {
		bfs_blocks_free(bl);
		return rc;
	}
	*out = bl;
	return 0;
}

int bfs_blocks_from_lens(struct bfs_blocks **out, const uint32_t *lens, uint64_t n,
			 const uint64_t *shard_nrec, size_t nshards, uint64_t block_size,
			 uint64_t window, uint64_t seed)
{
	struct bfs_blocks *bl;
	uint64_t r = 0;
	int rc = begin(&bl, block_size, window, seed);

	if (rc)
		return rc;
	for (size_t s = 0; s < nshards && !rc; s++)
		for (uint64_t i = 0; i < shard_nrec[s] && r < n && !rc; i++, r++)
			rc = cut_one(bl, r, lens[r], i == 0);
	return conclude(bl, r, rc, out);
}

int bfs_blocks_new(struct bfs_blocks **out, const struct bfs_dataset *ds, uint64_t block_size,
		   uint64_t window, uint64_t seed)
{
	enum { CHUNK = 4096 };
	struct bfs_blocks *bl;
	uint64_t recs[CHUNK], r = 0;
	uint32_t lens[CHUNK];
	int rc = begin(&bl, block_size, window, seed);

	if (rc)
		return rc;
	for (size_t s = 0; s < bfs_dataset_nshards(ds) && !rc; s++) {
		uint64_t nrec = bfs_shard_nrecords(bfs_dataset_shard(ds, s));

		for (uint64_t i = 0; i < nrec && !rc; i += CHUNK) {
			size_t m = nrec - i < CHUNK ? (size_t)(nrec - i) : CHUNK;
			for (size_t k = 0; k < m; k++)
				recs[k] = r + k;
			bfs_dataset_record_lens(ds, recs, m, lens);
			for (size_t k = 0; k < m && !rc; k++)
				rc = cut_one(bl, r + k, lens[k], i + k == 0);
			r += m;
		}
	}
	return conclude(bl, r, rc, out);
}

void bfs_blocks_free(struct bfs_blocks *bl)
{
	if (!bl)
		return;
	for (int i = 0; i < RECENT; i++)
		bfs_block_order_put(bl->recent[i]);
	pthread_mutex_destroy(&bl->lock);
	free(bl->start);
	free(bl);
}

uint64_t bfs_blocks_count(const struct bfs_blocks *bl)
{
	return bl->nblocks;
}

uint64_t bfs_blocks_start(const struct bfs_blocks *bl, uint64_t k)
{
	return bl->start[k < bl->nblocks ? k : bl->nblocks];
}

/* ------------------------------------------------------------ the order */

static void order_free(struct bfs_block_order *o)
{
	free(o->blk);
	free(o->cum);
	free(o);
}

void bfs_block_order_put(struct bfs_block_order *o)
{
	if (o && atomic_fetch_sub(&o->refs, 1) == 1)
		order_free(o);
}

static int order_new(struct bfs_block_order **out, const struct bfs_blocks *bl, uint64_t epoch)
{
	struct bfs_block_order *o = calloc(1, sizeof(*o));
	uint64_t nb = bl->nblocks;
	struct bfs_feistel p;

	if (!o)
		return -ENOMEM;
	o->blk = malloc((nb ? nb : 1) * sizeof(*o->blk));
	o->cum = malloc((nb + 1) * sizeof(*o->cum));
	if (!o->blk || !o->cum) {
		order_free(o);
		return -ENOMEM;
	}
	atomic_init(&o->refs, 1);
	o->epoch = epoch;
	o->bl = bl;
	o->ngroups = (nb + bl->window - 1) / bl->window;
	bfs_feistel_init(&p, nb, bl->seed_b, epoch, 1);
	o->cum[0] = 0;
	for (uint64_t i = 0; i < nb; i++) {
		uint64_t k = bfs_feistel_apply(&p, i);
		o->blk[i] = k;
		o->cum[i + 1] = o->cum[i] + (bl->start[k + 1] - bl->start[k]);
	}
	*out = o;
	return 0;
}

int bfs_block_order_get(struct bfs_block_order **out, struct bfs_blocks *bl, uint64_t epoch)
{
	struct bfs_block_order *o = NULL, *made = NULL;
	int rc;

	for (int pass = 0; pass < 2; pass++) {
		pthread_mutex_lock(&bl->lock);
		for (int i = 0; i < RECENT && !o; i++)
			if (bl->recent[i] && bl->recent[i]->epoch == epoch)
				o = bl->recent[i];
		if (!o && made) { /* insert ours, the oldest out */
			bfs_block_order_put(bl->recent[RECENT - 1]);
			for (int i = RECENT - 1; i > 0; i--)
				bl->recent[i] = bl->recent[i - 1];
			bl->recent[0] = o = made;
			made = NULL;
		}
		if (o)
			atomic_fetch_add(&o->refs, 1);
		pthread_mutex_unlock(&bl->lock);
		if (o)
			break;
		/* make it outside the lock (O(blocks)); someone may meanwhile */
		rc = order_new(&made, bl, epoch);
		if (rc)
			return rc;
	}
	bfs_block_order_put(made); /* made meanwhile by someone else */
	*out = o;
	return 0;
}

/* Group g: the sequence positions [*i0, *i1) of its blocks, and the
 * permutation of its records keyed for (seed, epoch, g). */
static void group_at(const struct bfs_block_order *o, uint64_t g, uint64_t *i0, uint64_t *i1,
		     struct bfs_feistel *p)
{
	const struct bfs_blocks *bl = o->bl;

	*i0 = g * bl->window;
	*i1 = bl->nblocks - *i0 < bl->window ? bl->nblocks : *i0 + bl->window;
	bfs_feistel_init(p, o->cum[*i1] - o->cum[*i0], bfs_mix64(bl->seed_b + GOLDEN * (g + 1)),
			 o->epoch, 1);
}

/* The group holding epoch position pos: the last g with cum[g*W] <= pos. */
static uint64_t group_of(const struct bfs_block_order *o, uint64_t pos)
{
	uint64_t lo = 0, hi = o->ngroups, w = o->bl->window;

	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (o->cum[mid * w] <= pos)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* The record at epoch position e, which lies in sequence positions [i0, i1). */
static uint64_t record_at(const struct bfs_block_order *o, uint64_t i0, uint64_t i1, uint64_t e)
{
	while (i1 - i0 > 1) {
		uint64_t mid = i0 + (i1 - i0) / 2;
		if (o->cum[mid] <= e)
			i0 = mid;
		else
			i1 = mid;
	}
	return o->bl->start[o->blk[i0]] + (e - o->cum[i0]);
}

uint64_t bfs_block_order_ngroups(const struct bfs_block_order *o)
{
	return o->ngroups;
}

uint64_t bfs_block_order_group_of(const struct bfs_block_order *o, uint64_t pos)
{
	return group_of(o, pos);
}

void bfs_block_order_group(const struct bfs_block_order *o, uint64_t g, uint64_t *p0, uint64_t *p1,
			   const uint64_t **blocks, uint64_t *nb)
{
	uint64_t i0 = g * o->bl->window, i1 = i0 + o->bl->window;

	if (i1 > o->bl->nblocks)
		i1 = o->bl->nblocks;
	*p0 = o->cum[i0];
	*p1 = o->cum[i1];
	*blocks = o->blk + i0;
	*nb = i1 - i0;
}

uint64_t bfs_block_order_apply(const struct bfs_block_order *o, uint64_t pos)
{
	uint64_t i0, i1, first;
	struct bfs_feistel p;

	group_at(o, group_of(o, pos), &i0, &i1, &p);
	first = o->cum[i0];
	return record_at(o, i0, i1, first + bfs_feistel_apply(&p, pos - first));
}

void bfs_block_order_apply_many(const struct bfs_block_order *o, const uint64_t *pos, size_t n,
				uint64_t *out)
{
	size_t k = 0;

	/* runs of positions in one group share its key set-up and take the
	 * Feistel permutation many at a time */
	while (k < n) {
		uint64_t i0, i1, first, end;
		struct bfs_feistel p;
		size_t j = k;

		group_at(o, group_of(o, pos[k]), &i0, &i1, &p);
		first = o->cum[i0];
		end = o->cum[i1];
		for (; j < n && pos[j] >= first && pos[j] < end; j++)
			out[j] = pos[j] - first;
		bfs_feistel_apply_many(&p, out + k, j - k, out + k, true);
		for (size_t t = k; t < j; t++)
			out[t] = record_at(o, i0, i1, first + out[t]);
		k = j;
	}
}
