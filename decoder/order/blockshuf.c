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
#define DEAL_TAG 0x6465616Cull /* "deal": keys the deal of blocks to partitions */
#define FRAMING 16u /* length, its CRC, the data's CRC */
#define RECENT 4 /* epoch orders kept */

/* A partition's piece: records [first, end) of one block. */
struct piece {
	uint64_t first, end;
};

struct bfs_blocks {
	uint64_t nrecords, nblocks, cap, window;
	uint64_t seed_b; /* keys the block permutation; groups derive theirs */
	uint64_t *start; /* [nblocks + 1] */
	uint64_t block_size, open_bytes; /* while cutting */
	uint64_t bytes; /* of every record, data + framing */
	/* partitions (bfs_blocks_partition): P, the batch size that cuts an
	 * epoch, its positions; with P > 1 the pieces, partition after
	 * partition, and where each partition's start ([P + 1]); with P = 1
	 * both NULL: the pieces are the blocks */
	uint64_t nparts, batch_size, epoch_len, npieces;
	struct piece *pieces;
	uint64_t *part_off;
	pthread_mutex_t lock;
	struct bfs_block_order *recent[RECENT]; /* most recently made first */
};

struct bfs_block_order {
	atomic_uint refs;
	uint64_t epoch;
	const struct bfs_blocks *bl;
	/* [npieces]: the piece at each position of its partition's sequence
	 * (partition q's at part_off[q] ...) */
	uint64_t *blk;
	/* [npieces + P]: partition q's position where each of its sequence's
	 * pieces starts, and its end, at part_off[q] + q ... */
	uint64_t *cum;
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
	bl->bytes += bytes;
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
	bl->nparts = 1;
	bl->epoch_len = n;
	bl->npieces = bl->nblocks;
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
	free(bl->pieces);
	free(bl->part_off);
	free(bl);
}

uint64_t bfs_blocks_count(const struct bfs_blocks *bl)
{
	return bl->nblocks;
}

uint64_t bfs_blocks_window(const struct bfs_blocks *bl)
{
	return bl->window;
}

uint64_t bfs_blocks_start(const struct bfs_blocks *bl, uint64_t k)
{
	return bl->start[k < bl->nblocks ? k : bl->nblocks];
}

/* ------------------------------------------------------------ partitions */

uint64_t bfs_blocks_nparts(const struct bfs_blocks *bl)
{
	return bl->nparts;
}

uint64_t bfs_blocks_epoch_len(const struct bfs_blocks *bl)
{
	return bl->epoch_len;
}

uint64_t bfs_blocks_npieces(const struct bfs_blocks *bl)
{
	return bl->npieces;
}

void bfs_blocks_piece(const struct bfs_blocks *bl, uint64_t k, uint64_t *first, uint64_t *end)
{
	if (bl->pieces) {
		*first = bl->pieces[k].first;
		*end = bl->pieces[k].end;
	} else {
		*first = bl->start[k];
		*end = bl->start[k + 1];
	}
}

void bfs_blocks_part_pieces(const struct bfs_blocks *bl, uint64_t q, uint64_t *k0, uint64_t *k1)
{
	if (bl->part_off) {
		*k0 = bl->part_off[q];
		*k1 = bl->part_off[q + 1];
	} else {
		*k0 = 0;
		*k1 = bl->nblocks;
	}
}

/* The first dealt record of partition q: floor(q * n / P). */
static uint64_t part_bound(uint64_t q, uint64_t n, uint64_t parts)
{
	return (uint64_t)((unsigned __int128)q * n / parts);
}

uint64_t bfs_blocks_part_records(const struct bfs_blocks *bl, uint64_t q)
{
	return part_bound(q + 1, bl->nrecords, bl->nparts) -
	       part_bound(q, bl->nrecords, bl->nparts);
}

uint64_t bfs_blocks_auto_partitions(const struct bfs_blocks *bl, uint64_t batch_size)
{
	uint64_t p = 1;

	while (p * 2 <= BFS_MAX_PARTITIONS && bl->nblocks / (p * 2) >= bl->window && batch_size &&
	       bl->nrecords / (p * 2) / batch_size >= BFS_AUTO_PART_BATCHES &&
	       bl->bytes / (p * 2) >= BFS_AUTO_PART_BYTES)
		p *= 2;
	return p;
}

static int piece_cmp(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	return (x->first > y->first) - (x->first < y->first);
}

/* The deal (docs/shuffle.md, section 5.1): the blocks in the order of a
 * permutation keyed by the seed alone, their records end to end, cut into
 * P runs of floor(n / P) or one more; a block cut between two runs gives
 * each its piece. Runs come in partition order, so the pieces do too. */
static void deal(struct bfs_blocks *bl, uint64_t parts)
{
	uint64_t n = bl->nrecords, dealt = 0, q = 0, np = 0;
	uint64_t next = part_bound(1, n, parts); /* where partition q + 1 starts */
	struct bfs_feistel d;

	bfs_feistel_init(&d, bl->nblocks, bfs_mix64(bl->seed_b ^ DEAL_TAG), 0, 1);
	bl->part_off[0] = 0;
	for (uint64_t i = 0; i < bl->nblocks; i++) {
		uint64_t b = bfs_feistel_apply(&d, i);
		uint64_t lo = bl->start[b], hi = bl->start[b + 1];

		while (lo < hi) {
			uint64_t take;

			while (dealt >= next && q + 1 < parts) {
				bl->part_off[++q] = np;
				next = part_bound(q + 1, n, parts);
			}
			take = hi - lo < next - dealt || q + 1 == parts ? hi - lo : next - dealt;
			bl->pieces[np++] = (struct piece){ lo, lo + take };
			lo += take;
			dealt += take;
		}
	}
	while (q < parts)
		bl->part_off[++q] = np;
	bl->npieces = np;
	for (q = 0; q < parts; q++)
		qsort(bl->pieces + bl->part_off[q], bl->part_off[q + 1] - bl->part_off[q],
		      sizeof(*bl->pieces), piece_cmp);
}

int bfs_blocks_partition(struct bfs_blocks *bl, uint64_t nparts, uint64_t batch_size)
{
	uint64_t each;

	if (nparts == 0 || nparts > BFS_MAX_PARTITIONS)
		return bfs_err_set(-EINVAL, "partitions=%llu: need 1 to %llu",
				   (unsigned long long)nparts,
				   (unsigned long long)BFS_MAX_PARTITIONS);
	if (nparts == 1 || bl->nparts != 1)
		return 0;
	each = bl->nrecords / nparts;
	if (batch_size == 0 || each < batch_size)
		return bfs_err_set(
			-EINVAL,
			"partitions=%llu: a partition would hold %llu records, fewer than "
			"a batch (batch_size=%llu): fewer partitions, or a smaller batch",
			(unsigned long long)nparts, (unsigned long long)each,
			(unsigned long long)batch_size);
	bl->pieces = malloc((bl->nblocks + nparts) * sizeof(*bl->pieces));
	bl->part_off = malloc((nparts + 1) * sizeof(*bl->part_off));
	if (!bl->pieces || !bl->part_off) {
		free(bl->pieces);
		free(bl->part_off);
		bl->pieces = NULL;
		bl->part_off = NULL;
		return -ENOMEM;
	}
	deal(bl, nparts);
	bl->nparts = nparts;
	bl->batch_size = batch_size;
	bl->epoch_len = nparts * (each / batch_size) * batch_size;
	return 0;
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

/* Partition q's key: the blocks' own for partition 0 (so that P = 1 is
 * section 5's order), mixed with q for the others. */
static uint64_t part_seed(const struct bfs_blocks *bl, uint64_t q)
{
	return bl->seed_b ^ bfs_mix64(q);
}

static uint64_t piece_len(const struct bfs_blocks *bl, uint64_t k)
{
	uint64_t first, end;

	bfs_blocks_piece(bl, k, &first, &end);
	return end - first;
}

static int order_new(struct bfs_block_order **out, const struct bfs_blocks *bl, uint64_t epoch)
{
	struct bfs_block_order *o = calloc(1, sizeof(*o));
	uint64_t np = bl->npieces;

	if (!o)
		return -ENOMEM;
	o->blk = malloc((np ? np : 1) * sizeof(*o->blk));
	o->cum = malloc((np + bl->nparts) * sizeof(*o->cum));
	if (!o->blk || !o->cum) {
		order_free(o);
		return -ENOMEM;
	}
	atomic_init(&o->refs, 1);
	o->epoch = epoch;
	o->bl = bl;
	for (uint64_t q = 0; q < bl->nparts; q++) {
		uint64_t k0, k1, *blk, *cum;
		struct bfs_feistel p;

		bfs_blocks_part_pieces(bl, q, &k0, &k1);
		blk = o->blk + k0;
		cum = o->cum + k0 + q;
		bfs_feistel_init(&p, k1 - k0, part_seed(bl, q), epoch, 1);
		cum[0] = 0;
		for (uint64_t i = 0; i < k1 - k0; i++) {
			blk[i] = k0 + bfs_feistel_apply(&p, i);
			cum[i + 1] = cum[i] + piece_len(bl, blk[i]);
		}
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

/* Partition q of an order: its sequence of pieces, the positions where
 * they start (n + 1 of them), and their count. */
struct part {
	const uint64_t *blk, *cum;
	uint64_t n, q;
};

static struct part part_of(const struct bfs_block_order *o, uint64_t q)
{
	uint64_t k0, k1;

	bfs_blocks_part_pieces(o->bl, q, &k0, &k1);
	return (struct part){ o->blk + k0, o->cum + k0 + q, k1 - k0, q };
}

/* Group g of partition pt: the sequence positions [*i0, *i1) of its
 * pieces, and the permutation of its records keyed for (seed, epoch, q, g). */
static void group_at(const struct bfs_block_order *o, const struct part *pt, uint64_t g,
		     uint64_t *i0, uint64_t *i1, struct bfs_feistel *p)
{
	uint64_t w = o->bl->window;

	*i0 = g * w;
	*i1 = pt->n - *i0 < w ? pt->n : *i0 + w;
	bfs_feistel_init(p, pt->cum[*i1] - pt->cum[*i0],
			 bfs_mix64(part_seed(o->bl, pt->q) + GOLDEN * (g + 1)), o->epoch, 1);
}

static uint64_t ngroups_of(const struct bfs_block_order *o, const struct part *pt)
{
	return (pt->n + o->bl->window - 1) / o->bl->window;
}

/* The group holding partition position u: the last g with cum[g*W] <= u. */
static uint64_t group_of(const struct bfs_block_order *o, const struct part *pt, uint64_t u)
{
	uint64_t lo = 0, hi = ngroups_of(o, pt), w = o->bl->window;

	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (pt->cum[mid * w] <= u)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* The record at partition position e, which lies in sequence positions
 * [i0, i1). */
static uint64_t record_at(const struct bfs_block_order *o, const struct part *pt, uint64_t i0,
			  uint64_t i1, uint64_t e)
{
	uint64_t first, end;

	while (i1 - i0 > 1) {
		uint64_t mid = i0 + (i1 - i0) / 2;
		if (pt->cum[mid] <= e)
			i0 = mid;
		else
			i1 = mid;
	}
	bfs_blocks_piece(o->bl, pt->blk[i0], &first, &end);
	return first + (e - pt->cum[i0]);
}

void bfs_block_order_locate(const struct bfs_block_order *o, uint64_t pos, uint64_t *q, uint64_t *u)
{
	const struct bfs_blocks *bl = o->bl;
	uint64_t g;

	if (bl->nparts == 1) {
		*q = 0;
		*u = pos;
		return;
	}
	g = pos / bl->batch_size;
	*q = g % bl->nparts;
	*u = g / bl->nparts * bl->batch_size + pos % bl->batch_size;
}

uint64_t bfs_block_order_ngroups(const struct bfs_block_order *o, uint64_t q)
{
	struct part pt = part_of(o, q);

	return ngroups_of(o, &pt);
}

uint64_t bfs_block_order_group_of(const struct bfs_block_order *o, uint64_t q, uint64_t u)
{
	struct part pt = part_of(o, q);

	return group_of(o, &pt, u);
}

void bfs_block_order_group(const struct bfs_block_order *o, uint64_t q, uint64_t g, uint64_t *u0,
			   uint64_t *u1, const uint64_t **pieces, uint64_t *n)
{
	struct part pt = part_of(o, q);
	uint64_t i0 = g * o->bl->window, i1 = i0 + o->bl->window;

	if (i1 > pt.n)
		i1 = pt.n;
	*u0 = pt.cum[i0];
	*u1 = pt.cum[i1];
	*pieces = pt.blk + i0;
	*n = i1 - i0;
}

uint64_t bfs_block_order_apply(const struct bfs_block_order *o, uint64_t pos)
{
	uint64_t q, u, i0, i1, first;
	struct bfs_feistel p;
	struct part pt;

	bfs_block_order_locate(o, pos, &q, &u);
	pt = part_of(o, q);
	group_at(o, &pt, group_of(o, &pt, u), &i0, &i1, &p);
	first = pt.cum[i0];
	return record_at(o, &pt, i0, i1, first + bfs_feistel_apply(&p, u - first));
}

void bfs_block_order_apply_many(const struct bfs_block_order *o, const uint64_t *pos, size_t n,
				uint64_t *out)
{
	size_t k = 0;

	/* runs of positions in one group share its key set-up and take the
	 * Feistel permutation many at a time */
	while (k < n) {
		uint64_t q, u, i0, i1, first, end;
		struct bfs_feistel p;
		struct part pt;
		size_t j = k;

		bfs_block_order_locate(o, pos[k], &q, &u);
		pt = part_of(o, q);
		group_at(o, &pt, group_of(o, &pt, u), &i0, &i1, &p);
		first = pt.cum[i0];
		end = pt.cum[i1];
		out[j++] = u - first;
		for (; j < n; j++) {
			uint64_t qj, uj;

			bfs_block_order_locate(o, pos[j], &qj, &uj);
			if (qj != q || uj < first || uj >= end)
				break;
			out[j] = uj - first;
		}
		bfs_feistel_apply_many(&p, out + k, j - k, out + k, true);
		for (size_t t = k; t < j; t++)
			out[t] = record_at(o, &pt, i0, i1, first + out[t]);
		k = j;
	}
}
