/*
 * batch.c — batch geometry and assembly (see batch.h).
 */
#include "batch.h"

#include "cntcache.h"
#include "example.h"
#include "image.h"
#include "keymap.h"
#include "pfor.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How far on_corrupt=skip looks for a valid substitute record: records
 * read and tried at most, and records looked at (their ragged counts). */
#define SKIP_MAX_TRIES 1024
#define SKIP_MAX_SCAN ((uint64_t)1 << 20)

/* One spec and the plan indices of its tensors (-1: none). */
struct driver {
	const struct bfs_feature_spec *spec;
	size_t key; /* its index in the batcher's context or list keymap */
	int main; /* MAIN, or VALUES for ragged */
	int aux; /* LENGTHS, VALUE_SPLITS, or ROW_SPLITS of RAGGED */
	int aux2; /* ROW_SPLITS of RAGGED2, VALUE_LENGTHS of a bytes feature list */
	/* a fixed-shape numeric context feature: n values of isz bytes in all
	 * (0: not such a feature); a row with exactly n values of the right
	 * kind is one copy (fill_row), anything else takes fill_feature */
	uint64_t fixed_n, fixed_bytes;
	/* a column of bound decoding (bfs_bind_column): a fixed numeric
	 * feature of n floats or one int64, or one bytes value of n bytes;
	 * kind NONE: not a column */
	enum bfs_kind col_kind;
	uint32_t col_n;
};

struct bfs_batcher {
	const struct bfs_dataset *ds;
	const struct bfs_schema *schema;
	struct bfs_plan *plan;
	struct bfs_batcher_opts o;
	uint64_t nrecords;
	uint64_t global_nb; /* batches per epoch, single sequence */
	uint64_t nb; /* batches per epoch for this rank */
	uint64_t rows; /* rows of the epoch view (all/): its batches end to end */
	uint64_t chunk_rows, nchunks; /* all/ is decoded in chunks of this many rows */
	/* ragged counts: counts[slot][record]; NULL when plan->nslots == 0 */
	uint32_t **counts;
	/* the plan's ragged values tensors (role VALUES): their cursors move */
	size_t *ragged;
	size_t nragged;
	size_t ndrivers;
	struct driver *drivers;
	/* the drivers that are not columns, in driver order: a row whose every
	 * column was written during the walk needs only these */
	size_t *others;
	size_t nothers, ncolumns;
	/* the drivers' names, for bound decoding (example.h) */
	struct bfs_keymap *ctx_keys, *list_keys;
	size_t nctx_keys, nlist_keys;
	const char **key_names; /* context names, then list names */
	struct bfs_blocks *blocks; /* shuffle=block, else NULL */
	bool plain; /* no compressed shard: parts are read in chunks (READ_CHUNK) */
	/* fixed-size tensors: the geometry of every full batch (a copy of it
	 * costs far less than its JSON header written again), else NULL */
	struct bfs_geom *full_geom;
	const struct bfs_batcher *base; /* a rank's copy: everything above is base's */
};

static int make_drivers(struct bfs_batcher *b);
static int make_keymaps(struct bfs_batcher *b);
static void size_chunks(struct bfs_batcher *b);

const struct bfs_plan *bfs_batcher_plan(const struct bfs_batcher *b)
{
	return b->plan;
}

uint64_t bfs_batcher_nbatches(const struct bfs_batcher *b)
{
	return b->nb;
}

uint64_t bfs_batcher_global_nbatches(const struct bfs_batcher *b)
{
	return b->global_nb;
}

static uint64_t global_batch(const struct bfs_batcher *b, uint64_t batch)
{
	return batch * b->o.world + b->o.rank;
}

uint64_t bfs_batcher_batch_len(const struct bfs_batcher *b, uint64_t batch)
{
	uint64_t start = global_batch(b, batch) * b->o.batch_size;
	uint64_t left = b->nrecords - start;

	return left < b->o.batch_size ? left : b->o.batch_size;
}

uint64_t bfs_batcher_record(const struct bfs_batcher *b, const struct bfs_perm *p, uint64_t batch,
			    uint64_t j)
{
	return bfs_perm_apply(p, global_batch(b, batch) * b->o.batch_size + j);
}

int bfs_batcher_perm(const struct bfs_batcher *b, uint64_t epoch, struct bfs_perm *out)
{
	bfs_perm_init(out, b->nrecords, b->o.seed, epoch, b->o.shuffle);
	if (b->blocks && b->nrecords > 0)
		return bfs_block_order_get(&out->bo, b->blocks, epoch);
	return 0;
}

const struct bfs_blocks *bfs_batcher_blocks(const struct bfs_batcher *b)
{
	return b->blocks;
}

uint64_t bfs_batcher_rows(const struct bfs_batcher *b)
{
	return b->rows;
}

uint64_t bfs_batcher_chunk_rows(const struct bfs_batcher *b)
{
	return b->chunk_rows;
}

uint64_t bfs_batcher_nchunks(const struct bfs_batcher *b)
{
	return b->nchunks;
}

int bfs_batcher_unit_rows(const struct bfs_batcher *b, uint64_t unit, uint64_t *r0, uint64_t *n)
{
	if (unit & BFS_CHUNK) {
		uint64_t c = unit & ~BFS_CHUNK;
		if (c >= b->nchunks)
			return -ENOENT;
		*r0 = c * b->chunk_rows;
		*n = b->rows - *r0 < b->chunk_rows ? b->rows - *r0 : b->chunk_rows;
		return 0;
	}
	if (unit >= b->nb)
		return -ENOENT;
	*r0 = unit * b->o.batch_size;
	*n = bfs_batcher_batch_len(b, unit);
	return 0;
}

uint64_t bfs_batcher_row_pos(const struct bfs_batcher *b, uint64_t r)
{
	uint64_t B = b->o.batch_size;

	return global_batch(b, r / B) * B + r % B;
}

void bfs_batcher_row_records(const struct bfs_batcher *b, const struct bfs_perm *p, uint64_t r0,
			     size_t n, uint64_t *out)
{
	uint64_t B = b->o.batch_size;

	/* positions first (in place), then the permutation over all of them */
	for (size_t k = 0; k < n; k++) {
		uint64_t r = r0 + k;
		out[k] = global_batch(b, r / B) * B + r % B;
	}
	bfs_perm_apply_many(p, out, n, out);
}

void bfs_batcher_row_totals(const struct bfs_batcher *b, const struct bfs_perm *p, uint64_t r0,
			    uint64_t n, uint64_t *totals)
{
	size_t nslots = b->plan->nslots;
	uint64_t recs[256];

	for (size_t s = 0; s < nslots; s++)
		totals[s] = 0;
	if (!nslots)
		return;
	for (uint64_t r = r0; r < r0 + n; r += BFS_ARRAY_SIZE(recs)) {
		size_t m = r0 + n - r < BFS_ARRAY_SIZE(recs) ? (size_t)(r0 + n - r)
							     : BFS_ARRAY_SIZE(recs);
		bfs_batcher_row_records(b, p, r, m, recs);
		for (size_t k = 0; k < m; k++)
			for (size_t s = 0; s < nslots; s++)
				totals[s] += b->counts[s][recs[k]];
	}
}

/* ------------------------------------------------------- ragged counting */

/* The count pass decodes every record of the shards whose counts are not
 * cached: their records, end to end, are split evenly over the jobs. */
struct count_seg {
	uint64_t first, n; /* global records [first, first + n) */
	uint64_t pos; /* records of the segments before this one */
	size_t shard;
};

struct count_pass {
	struct bfs_batcher *b;
	const struct count_seg *segs;
	size_t nsegs;
	bool *failed; /* [nshards]: a record not read or decoded (written atomically) */
	uint64_t total; /* records of the segments */
	unsigned shares; /* their positions, end to end, in this many equal shares */
};

static void count_record(struct bfs_batcher *b, uint64_t rec, const struct bfs_example *ex)
{
	const struct bfs_plan *p = b->plan;

	for (size_t t = 0; t < p->ntensors; t++) {
		const struct bfs_tensor_tmpl *tm = &p->t[t];
		uint64_t nv = 0, nbytes = 0;

		if (tm->role != BFS_ROLE_VALUES)
			continue;
		if (ex)
			bfs_spec_ragged_counts(tm->spec, ex, &nv, &nbytes);
		b->counts[tm->ragged_slot][rec] = nv > UINT32_MAX ? UINT32_MAX : (uint32_t)nv;
		if (tm->spec->layout == BFS_LAYOUT_RAGGED2)
			b->counts[tm->ragged_slot + 1][rec] =
				nbytes > UINT32_MAX ? UINT32_MAX : (uint32_t)nbytes;
	}
}

/* Whether ex can be counted: every ragged feature it holds has the
 * schema's kind (a value of another kind fails its row). */
static bool countable(const struct bfs_batcher *b, const struct bfs_example *ex)
{
	const struct bfs_plan *p = b->plan;

	for (size_t t = 0; t < p->ntensors; t++) {
		const struct bfs_tensor_tmpl *tm = &p->t[t];
		const struct bfs_values *v;

		if (tm->role != BFS_ROLE_VALUES)
			continue;
		v = bfs_example_find(ex, tm->spec->name);
		if (v && v->kind != BFS_KIND_NONE && v->kind != tm->spec->kind)
			return false;
	}
	return true;
}

/* Read and decode record r for counting (no CRC check: a record whose
 * bytes decode is counted as they are). *ex on success. */
static bool count_read(const struct bfs_batcher *b, uint64_t r, uint8_t *buf, uint32_t cap,
		       struct bfs_example **ex)
{
	uint32_t len;

	*ex = NULL;
	if (bfs_dataset_read(b->ds, r, buf, cap, &len, false) != 0 ||
	    bfs_example_decode(ex, buf, len) != 0)
		return false;
	if (countable(b, *ex))
		return true;
	bfs_example_free(*ex);
	*ex = NULL;
	return false;
}

/* What a count_as_next search found: records (from, to) cannot be
 * counted, and `to` can (found) or is where the search gave up. */
struct count_memo {
	uint64_t from, to;
	bool found, valid;
};

/* Record r cannot be counted (unreadable, undecodable, a ragged value of
 * the wrong kind): its batches fail it, or replace it with the next valid
 * record whose counts equal those counted here (on_corrupt=skip,
 * fill_substitute). Count it as the next record that can be counted, so
 * that this record normally replaces it; 0 if none is found among the
 * next SKIP_MAX_TRIES. A run of such records is searched once (memo). */
static void count_as_next(struct bfs_batcher *b, uint64_t r, uint8_t *buf, uint32_t cap,
			  struct count_memo *memo)
{
	uint64_t k;

	if (memo->valid && memo->from < r && r < memo->to) {
		if (!memo->found) {
			count_record(b, r, NULL);
			return;
		}
		for (size_t s = 0; s < b->plan->nslots; s++)
			b->counts[s][r] = b->counts[s][memo->from];
		return;
	}
	for (k = 1; k < SKIP_MAX_TRIES && k < b->nrecords; k++) {
		struct bfs_example *ex;

		if (count_read(b, (r + k) % b->nrecords, buf, cap, &ex)) {
			count_record(b, r, ex);
			bfs_example_free(ex);
			*memo = (struct count_memo){ r, r + k, true, true };
			return;
		}
	}
	count_record(b, r, NULL);
	*memo = (struct count_memo){ r, r + k, false, true };
}

/* Share j of the positions: one run of consecutive records, in order, so
 * that count_as_next's memo serves a run of records it cannot count. */
static int count_share(void *arg, size_t j)
{
	const struct count_pass *cp = arg;
	struct bfs_batcher *b = cp->b;
	uint64_t lo = cp->total * j / cp->shares, hi = cp->total * (j + 1) / cp->shares;
	uint32_t cap = bfs_dataset_max_record_len(b->ds);
	uint8_t *buf = malloc(cap ? cap : 1);
	struct count_memo memo = { 0 };
	size_t k = 0;

	if (!buf)
		return bfs_err_set(-ENOMEM, "out of memory");
	for (uint64_t pos = lo; pos < hi; pos++) {
		struct bfs_example *ex = NULL;
		uint64_t r;

		while (pos >= cp->segs[k].pos + cp->segs[k].n)
			k++;
		r = cp->segs[k].first + (pos - cp->segs[k].pos);
		/* A record that cannot be counted takes the counts of the next
		 * one; reading its batch reports it. Its shard's counts are not
		 * cached (the failure may not last, and the next record may lie
		 * in another shard). */
		if (count_read(b, r, buf, cap, &ex)) {
			count_record(b, r, ex);
			bfs_example_free(ex);
		} else {
			count_as_next(b, r, buf, cap, &memo);
			__atomic_store_n(&cp->failed[cp->segs[k].shard], true, __ATOMIC_RELAXED);
		}
	}
	free(buf);
	return 0;
}

/* Decode the records of segs, one share per job. */
static int count_segments(struct count_pass *cp, uint64_t total)
{
	unsigned jobs = cp->b->o.jobs ? cp->b->o.jobs : 1;

	if (total == 0)
		return 0;
	if (jobs > BFS_PFOR_MAX_THREADS)
		jobs = BFS_PFOR_MAX_THREADS;
	cp->total = total;
	cp->shares = jobs;
	return bfs_pfor(jobs, jobs, count_share, cp);
}

/* The columns of the shard whose first record is `first`. */
static void cols_at(const struct bfs_batcher *b, uint64_t first, uint32_t **cols)
{
	for (size_t s = 0; s < b->plan->nslots; s++)
		cols[s] = b->counts[s] + first;
}

static int count_ragged(struct bfs_batcher *b)
{
	size_t nslots = b->plan->nslots, nshards = bfs_dataset_nshards(b->ds), nsegs = 0;
	struct bfs_cntcache *cc = NULL; /* the cache (cntcache.h); NULL: none */
	struct count_seg *segs = NULL;
	struct count_pass cp = { .b = b };
	uint32_t **cols = NULL;
	uint64_t first = 0, total = 0;
	int rc = -ENOMEM;

	if (nslots == 0)
		return 0;
	b->counts = calloc(nslots, sizeof(*b->counts));
	if (!b->counts)
		return -ENOMEM;
	for (size_t s = 0; s < nslots; s++) {
		b->counts[s] = calloc(b->nrecords ? b->nrecords : 1, sizeof(uint32_t));
		if (!b->counts[s])
			return -ENOMEM;
	}
	segs = calloc(nshards ? nshards : 1, sizeof(*segs));
	cp.failed = calloc(nshards ? nshards : 1, sizeof(*cp.failed));
	cols = calloc(nslots, sizeof(*cols));
	if (!segs || !cp.failed || !cols ||
	    (b->o.index_dir && bfs_cntcache_new(&cc, b->ds, b->plan, b->o.index_dir, b->o.on_note,
						b->o.note_ctx) == -ENOMEM))
		goto out;
	for (size_t i = 0; i < nshards; i++) {
		uint64_t n = bfs_shard_nrecords(bfs_dataset_shard(b->ds, i));

		cols_at(b, first, cols);
		if (n && !(cc && bfs_cntcache_load(cc, i, cols))) {
			segs[nsegs++] = (struct count_seg){ first, n, total, i };
			total += n;
		}
		first += n;
	}
	cp.segs = segs;
	cp.nsegs = nsegs;
	rc = count_segments(&cp, total);
	for (size_t k = 0; !rc && cc && k < nsegs; k++) {
		if (cp.failed[segs[k].shard])
			continue;
		cols_at(b, segs[k].first, cols);
		bfs_cntcache_put(cc, segs[k].shard, (const uint32_t *const *)cols);
	}
	if (!rc) /* the small shards' counts: one write per pack */
		bfs_cntcache_save(cc);
out:
	bfs_cntcache_free(cc);
	free(cols);
	free(cp.failed);
	free(segs);
	return rc;
}

/* ------------------------------------------------------------------ new */

void bfs_batcher_free(struct bfs_batcher *b)
{
	if (!b)
		return;
	if (b->base) { /* a rank's copy owns nothing */
		free(b);
		return;
	}
	bfs_blocks_free(b->blocks);
	if (b->counts) {
		for (size_t s = 0; s < b->plan->nslots; s++)
			free(b->counts[s]);
		free(b->counts);
	}
	bfs_geom_free(b->full_geom);
	bfs_plan_free(b->plan);
	free(b->drivers);
	free(b->others);
	free(b->ragged);
	bfs_keymap_free(b->ctx_keys);
	bfs_keymap_free(b->list_keys);
	free(b->key_names);
	free(b);
}

int bfs_batcher_new(struct bfs_batcher **out, const struct bfs_dataset *ds,
		    const struct bfs_schema *s, const struct bfs_batcher_opts *o)
{
	struct bfs_batcher *b;
	int rc;

	if (o->batch_size == 0)
		return bfs_err_set(-EINVAL, "batch_size must be at least 1");
	if (o->world == 0 || o->rank >= o->world)
		return bfs_err_set(-EINVAL, "rank=%llu,world=%llu: need 0 <= rank < world",
				   (unsigned long long)o->rank, (unsigned long long)o->world);
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->ds = ds;
	b->schema = s;
	b->o = *o;
	b->nrecords = bfs_dataset_nrecords(ds);
	b->plain = true;
	for (size_t i = 0; i < bfs_dataset_nshards(ds); i++)
		if (bfs_shard_compression(bfs_dataset_shard(ds, i)) != BFS_COMP_NONE)
			b->plain = false;
	rc = bfs_plan_new(&b->plan, s);
	if (!rc)
		rc = make_drivers(b);
	if (rc)
		goto fail;
	b->global_nb = o->drop_remainder ? b->nrecords / o->batch_size
					 : (b->nrecords + o->batch_size - 1) / o->batch_size;
	b->nb = b->global_nb / o->world;
	/* fixed-size tensors: check the full-batch size against the limit now */
	if (b->plan->nslots == 0 && b->nb > 0) {
		rc = bfs_geom_new(&b->full_geom, b->plan, o->batch_size, NULL, o->max_batch_bytes);
		if (rc)
			goto fail;
	}
	rc = count_ragged(b);
	if (!rc && o->shuffle && o->block)
		rc = bfs_blocks_new(&b->blocks, ds, o->block_size, o->window, o->seed);
	if (rc)
		goto fail;
	size_chunks(b);
	*out = b;
	return 0;
fail:
	bfs_batcher_free(b);
	return rc;
}

int bfs_batcher_new_rank(struct bfs_batcher **out, const struct bfs_batcher *base, uint64_t rank)
{
	struct bfs_batcher *b;

	if (rank >= base->o.world)
		return bfs_err_set(-EINVAL, "rank=%llu,world=%llu: need 0 <= rank < world",
				   (unsigned long long)rank, (unsigned long long)base->o.world);
	b = malloc(sizeof(*b));
	if (!b)
		return -ENOMEM;
	*b = *base;
	b->base = base;
	b->o.rank = rank;
	/* all/ ends with the rank's last batch (chunk_rows is the same) */
	b->rows = b->nb ? (b->nb - 1) * b->o.batch_size + bfs_batcher_batch_len(b, b->nb - 1) : 0;
	b->nchunks = (b->rows + b->chunk_rows - 1) / b->chunk_rows;
	*out = b;
	return 0;
}

/* all/ is decoded in chunks of about CHUNK_BYTES, whatever the batch size:
 * large enough that a chunk amortises its set-up and both cores can share
 * one, small enough that a read of a few rows decodes little. Row bytes of
 * ragged tensors are their average over the dataset. */
#define CHUNK_BYTES ((uint64_t)2 << 20)

static void size_chunks(struct bfs_batcher *b)
{
	const struct bfs_plan *p = b->plan;
	double row = 0;

	b->rows = b->nb ? (b->nb - 1) * b->o.batch_size + bfs_batcher_batch_len(b, b->nb - 1) : 0;
	/* fixed bytes per row: a one-row geometry with no ragged values */
	if (p->nslots <= 2 * 64 + 2) {
		uint64_t zero[2 * 64 + 2] = { 0 };
		struct bfs_geom *g = NULL;
		if (bfs_geom_new(&g, p, 1, zero, 0) == 0) {
			for (size_t k = 0; k < g->ntensors; k++)
				row += (double)g->g[k].nbytes;
			bfs_geom_free(g);
		}
	}
	for (size_t t = 0; t < p->ntensors && b->nrecords; t++) {
		const struct bfs_tensor_tmpl *tm = &p->t[t];
		uint64_t sum = 0;

		if (tm->role != BFS_ROLE_VALUES)
			continue;
		/* RAGGED2: the byte slot; RAGGED: values times their size */
		size_t slot = (size_t)tm->ragged_slot + (tm->spec->layout == BFS_LAYOUT_RAGGED2);
		for (uint64_t r = 0; r < b->nrecords; r++)
			sum += b->counts[slot][r];
		row += (double)sum *
		       (double)(tm->spec->layout == BFS_LAYOUT_RAGGED2
					? 1
					: bfs_dtype_size(tm->dtype)) /
		       (double)b->nrecords;
	}
	b->chunk_rows =
		row >= (double)CHUNK_BYTES ? 1 : (uint64_t)((double)CHUNK_BYTES / (row + 1));
	if (b->o.chunk_rows)
		b->chunk_rows = b->o.chunk_rows;
	if (b->chunk_rows == 0)
		b->chunk_rows = 1;
	b->nchunks = (b->rows + b->chunk_rows - 1) / b->chunk_rows;
}

/* The keymaps of bound decoding: context names 0..nctx-1, list names
 * 0..nlists-1, each driver knowing its index. */
static int make_keymaps(struct bfs_batcher *b)
{
	const char **lists;
	int rc;

	b->key_names = calloc(b->ndrivers + 1, sizeof(*b->key_names));
	if (!b->key_names)
		return -ENOMEM;
	for (size_t d = 0; d < b->ndrivers; d++)
		if (!b->drivers[d].spec->is_list) {
			b->drivers[d].key = b->nctx_keys;
			b->key_names[b->nctx_keys++] = b->drivers[d].spec->name;
		}
	lists = b->key_names + b->nctx_keys;
	for (size_t d = 0; d < b->ndrivers; d++)
		if (b->drivers[d].spec->is_list) {
			b->drivers[d].key = b->nlist_keys;
			lists[b->nlist_keys++] = b->drivers[d].spec->name;
		}
	rc = bfs_keymap_new(&b->ctx_keys, b->key_names, b->nctx_keys);
	if (!rc)
		rc = bfs_keymap_new(&b->list_keys, lists, b->nlist_keys);
	return rc;
}

/* Which drivers are columns of bound decoding, and the list of the rest. */
static int make_columns(struct bfs_batcher *b)
{
	b->others = calloc(b->ndrivers + 1, sizeof(*b->others));
	if (!b->others)
		return -ENOMEM;
	for (size_t d = 0; d < b->ndrivers; d++) {
		struct driver *dr = &b->drivers[d];
		const struct bfs_feature_spec *f = dr->spec;
		uint64_t n = 0;

		dr->col_kind = BFS_KIND_NONE;
		if (f->layout == BFS_LAYOUT_FIXED && !f->is_list && !f->image && dr->main >= 0) {
			if (f->kind == BFS_KIND_FLOAT ||
			    (f->kind == BFS_KIND_INT64 && dr->fixed_n == 1))
				n = dr->fixed_n;
			else if (f->kind == BFS_KIND_BYTES)
				n = bfs_spec_elems(f) * bfs_dtype_size(f->dtype == BFS_DT_INVALID
									       ? BFS_DT_U8
									       : f->dtype);
		}
		if (n > 0 && n <= UINT32_MAX) {
			dr->col_kind = f->kind;
			dr->col_n = (uint32_t)n;
			b->ncolumns++;
		} else {
			b->others[b->nothers++] = d;
		}
	}
	return 0;
}

static int make_drivers(struct bfs_batcher *b)
{
	const struct bfs_plan *p = b->plan;

	b->drivers = calloc(p->ntensors ? p->ntensors : 1, sizeof(*b->drivers));
	b->ragged = calloc(p->ntensors ? p->ntensors : 1, sizeof(*b->ragged));
	if (!b->drivers || !b->ragged)
		return -ENOMEM;
	for (size_t t = 0; t < p->ntensors; t++) {
		const struct bfs_feature_spec *f = p->t[t].spec;
		struct driver *dr = NULL;

		for (size_t d = 0; d < b->ndrivers; d++)
			if (b->drivers[d].spec == f)
				dr = &b->drivers[d];
		if (!dr) {
			dr = &b->drivers[b->ndrivers++];
			dr->spec = f;
			dr->main = dr->aux = dr->aux2 = -1;
		}
		if (p->t[t].role == BFS_ROLE_VALUES)
			b->ragged[b->nragged++] = t;
		switch (p->t[t].role) {
		case BFS_ROLE_MAIN:
		case BFS_ROLE_VALUES:
			dr->main = (int)t;
			if (f->layout == BFS_LAYOUT_FIXED && !f->is_list && !f->image &&
			    (f->kind == BFS_KIND_FLOAT || f->kind == BFS_KIND_INT64)) {
				dr->fixed_n = bfs_spec_elems(f);
				dr->fixed_bytes = dr->fixed_n * (f->kind == BFS_KIND_FLOAT ? 4 : 8);
			}
			break;
		case BFS_ROLE_LENGTHS:
		case BFS_ROLE_VALUE_SPLITS:
			dr->aux = (int)t;
			break;
		case BFS_ROLE_ROW_SPLITS:
			if (f->layout == BFS_LAYOUT_RAGGED)
				dr->aux = (int)t;
			else
				dr->aux2 = (int)t;
			break;
		case BFS_ROLE_VALUE_LENGTHS:
			dr->aux2 = (int)t;
			break;
		}
	}
	return make_columns(b) ? -ENOMEM : make_keymaps(b);
}

int bfs_batcher_geom(struct bfs_geom **out, const struct bfs_batcher *b, uint64_t epoch,
		     uint64_t unit)
{
	uint64_t totals[2 * 64 + 2];
	uint64_t *tot = totals;
	struct bfs_perm p;
	uint64_t r0, len;
	int rc = bfs_batcher_unit_rows(b, unit, &r0, &len);

	if (rc)
		return rc;
	if (b->full_geom && !(unit & BFS_CHUNK) && len == b->o.batch_size)
		return bfs_geom_dup(out, b->full_geom);
	if (b->plan->nslots > BFS_ARRAY_SIZE(totals)) {
		tot = calloc(b->plan->nslots, sizeof(*tot));
		if (!tot)
			return -ENOMEM;
	}
	rc = bfs_batcher_perm(b, epoch, &p);
	if (!rc) {
		bfs_batcher_row_totals(b, &p, r0, len, tot);
		bfs_perm_release(&p);
		rc = bfs_geom_new(out, b->plan, len, tot,
				  (unit & BFS_CHUNK) ? 0 : b->o.max_batch_bytes);
	}
	if (tot != totals)
		free(tot);
	return rc;
}

/* ------------------------------------------------------------- assembly */

/* Write cursor of one output tensor. */
struct cursor {
	uint8_t *base; /* start of the tensor's data */
	uint64_t nbytes;
	uint64_t pos; /* RAGGED values: elements written; RAGGED2: bytes */
	uint64_t nvals; /* RAGGED2: values written */
};

static int fail_feature(const struct bfs_feature_spec *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int fail_feature(const struct bfs_feature_spec *f, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return bfs_err_set(-EBADMSG, "feature '%s%s': %s", f->is_list ? "feature_lists/" : "",
			   f->name, msg);
}

static void put_scalar(uint8_t *dst, enum bfs_kind k, union bfs_scalar v, uint64_t n)
{
	if (k == BFS_KIND_FLOAT) {
		float f = (float)v.f;
		for (uint64_t i = 0; i < n; i++)
			memcpy(dst + i * 4, &f, 4);
	} else {
		for (uint64_t i = 0; i < n; i++)
			memcpy(dst + i * 8, &v.i, 8);
	}
}

static void put_values(uint8_t *dst, const struct bfs_values *v)
{
	if (v->count == 1) { /* scalars: a fixed-size copy, no call */
		if (v->kind == BFS_KIND_FLOAT)
			memcpy(dst, v->f, 4);
		else
			memcpy(dst, v->i, 8);
		return;
	}
	if (v->count == 0) /* the arrays may be NULL then: memcpy's arguments must not be */
		return;
	if (v->kind == BFS_KIND_FLOAT)
		memcpy(dst, v->f, v->count * 4);
	else
		memcpy(dst, v->i, v->count * 8);
}

static bool present(const struct bfs_values *v)
{
	return v && v->kind != BFS_KIND_NONE;
}

static int check_kind(const struct bfs_feature_spec *f, const struct bfs_values *v)
{
	if (v->kind != f->kind)
		return fail_feature(f, "value is %s, schema says %s", bfs_kind_name(v->kind),
				    bfs_kind_name(f->kind));
	return 0;
}

static int int32_put(uint8_t *dst, uint64_t j, uint64_t val)
{
	int32_t x = (int32_t)val;
	memcpy(dst + j * 4, &x, 4);
	return 0;
}

static void int64_put(uint8_t *dst, uint64_t j, uint64_t val)
{
	int64_t x = (int64_t)val;
	memcpy(dst + j * 8, &x, 8);
}

/* Fill row j of a context feature's tensors. main/aux are the tensors in
 * plan order for this spec (see the roles). */
static int fill_feature(const struct bfs_feature_spec *f, const struct bfs_values *v, uint64_t j,
			struct cursor *c_main, struct cursor *c_aux, struct cursor *c_aux2)
{
	uint64_t n, isz;
	int rc;

	/* the plan gives every layout its tensors (make_drivers) */
	if (!c_main || (f->layout != BFS_LAYOUT_FIXED && !c_aux) ||
	    (f->layout == BFS_LAYOUT_RAGGED2 && !c_aux2))
		return fail_feature(f, "internal error: an output tensor is missing");
	switch (f->layout) {
	case BFS_LAYOUT_FIXED:
		n = bfs_spec_elems(f);
		if (f->kind == BFS_KIND_BYTES) {
			isz = n * bfs_dtype_size(f->dtype == BFS_DT_INVALID ? BFS_DT_U8 : f->dtype);
			if (!present(v))
				return fail_feature(f, "missing (no default for bytes)");
			if ((rc = check_kind(f, v)))
				return rc;
			if (v->count != 1)
				return fail_feature(f, "%zu values, schema expects 1", v->count);
			if (v->b[0].len != isz)
				return fail_feature(f, "value is %zu bytes, schema expects %llu",
						    v->b[0].len, (unsigned long long)isz);
			memcpy(c_main->base + j * isz, v->b[0].data, isz);
			return 0;
		}
		isz = n * (f->kind == BFS_KIND_FLOAT ? 4 : 8);
		if (!present(v) || v->count == 0) {
			if (!f->has_default)
				return fail_feature(f, "missing and the schema gives no default");
			put_scalar(c_main->base + j * isz, f->kind, f->dflt, n);
			return 0;
		}
		if ((rc = check_kind(f, v)))
			return rc;
		if (v->count != n)
			return fail_feature(f, "%zu values, schema expects %llu", v->count,
					    (unsigned long long)n);
		put_values(c_main->base + j * isz, v);
		return 0;

	case BFS_LAYOUT_PADDED: {
		uint64_t len = 0, ml = (uint64_t)f->max_len;

		if (f->kind == BFS_KIND_BYTES) {
			if (present(v)) {
				if ((rc = check_kind(f, v)))
					return rc;
				if (v->count > 1)
					return fail_feature(f,
							    "%zu values, schema expects at most 1",
							    v->count);
				if (v->count == 1) {
					len = v->b[0].len;
					if (len > ml)
						return fail_feature(f,
								    "value is %llu bytes, longer "
								    "than max_len %llu",
								    (unsigned long long)len,
								    (unsigned long long)ml);
					memcpy(c_main->base + j * ml, v->b[0].data, len);
				}
			}
			return int32_put(c_aux->base, j, len);
		}
		isz = f->kind == BFS_KIND_FLOAT ? 4 : 8;
		if (present(v)) {
			if ((rc = check_kind(f, v)))
				return rc;
			len = v->count;
			if (len > ml)
				return fail_feature(f, "%llu values, longer than max_len %llu",
						    (unsigned long long)len,
						    (unsigned long long)ml);
			put_values(c_main->base + j * ml * isz, v);
		}
		if (len < ml)
			put_scalar(c_main->base + (j * ml + len) * isz, f->kind, f->pad, ml - len);
		return int32_put(c_aux->base, j, len);
	}

	case BFS_LAYOUT_RAGGED:
		/* c_main = values, c_aux = row_splits */
		isz = f->kind == BFS_KIND_FLOAT ? 4 : 8;
		if (present(v)) {
			if ((rc = check_kind(f, v)))
				return rc;
			if ((c_main->pos + v->count) * isz > c_main->nbytes)
				return fail_feature(f, "more values than the index counted");
			put_values(c_main->base + c_main->pos * isz, v);
			c_main->pos += v->count;
		}
		if (j == 0)
			int64_put(c_aux->base, 0, 0);
		int64_put(c_aux->base, j + 1, c_main->pos);
		return 0;

	case BFS_LAYOUT_RAGGED2:
		/* c_main = values (bytes), c_aux = value_splits, c_aux2 = row_splits */
		if (j == 0) {
			int64_put(c_aux->base, 0, 0);
			int64_put(c_aux2->base, 0, 0);
		}
		if (present(v)) {
			if ((rc = check_kind(f, v)))
				return rc;
			for (size_t k = 0; k < v->count; k++) {
				uint64_t l = v->b[k].len;
				if (c_main->pos + l > c_main->nbytes ||
				    (c_main->nvals + 2) * 8 > c_aux->nbytes)
					return fail_feature(f, "more bytes than the index counted");
				memcpy(c_main->base + c_main->pos, v->b[k].data, l);
				c_main->pos += l;
				c_main->nvals++;
				int64_put(c_aux->base, c_main->nvals, c_main->pos);
			}
		}
		int64_put(c_aux2->base, j + 1, c_main->nvals);
		return 0;
	}
	return fail_feature(f, "unknown layout");
}

/* Row j of an image feature: its one JPEG/PNG value decoded and resized to
 * the spec's [H, W, C]. */
static int fill_image(const struct bfs_batcher *b, const struct bfs_feature_spec *f,
		      const struct bfs_values *v, uint64_t j, struct cursor *c_main)
{
	struct bfs_image_target t = {
		.h = (uint32_t)f->shape[0],
		.w = (uint32_t)f->shape[1],
		.c = (uint32_t)f->shape[2],
		.resize = f->resize,
		.filter = f->filter,
		.max_pixels = b->o.image_max_pixels,
	};
	uint64_t isz = (uint64_t)t.h * t.w * t.c;
	int rc;

	if (!present(v))
		return fail_feature(f, "missing (an image feature needs one value)");
	if ((rc = check_kind(f, v)))
		return rc;
	if (v->count != 1)
		return fail_feature(f, "%zu values, an image feature takes 1", v->count);
	if ((j + 1) * isz > c_main->nbytes)
		return fail_feature(f, "internal error: row %llu is outside the tensor",
				    (unsigned long long)j);
	rc = bfs_image_decode(c_main->base + j * isz, &t, v->b[0].data, v->b[0].len);
	if (rc == -ENOMEM)
		return rc;
	if (rc)
		return fail_feature(f, "%s", bfs_err_msg());
	return 0;
}

/* Row j of a feature list: its steps (zero-padded), its step count and,
 * for bytes, each value's length (c_vlen). */
static int fill_list(const struct bfs_feature_spec *f, const struct bfs_feature_list *fl,
		     uint64_t j, struct cursor *c_main, struct cursor *c_len, struct cursor *c_vlen)
{
	uint64_t per_step = bfs_spec_elems(f);
	uint64_t isz = bfs_dtype_size(f->kind == BFS_KIND_FLOAT	  ? BFS_DT_F32
				      : f->kind == BFS_KIND_INT64 ? BFS_DT_I64
								  : BFS_DT_U8);
	uint64_t step_bytes = per_step * isz;
	uint64_t nsteps = fl ? fl->nsteps : 0;
	uint8_t *row;

	if (!c_main || !c_len || (f->kind == BFS_KIND_BYTES && !c_vlen))
		return fail_feature(f, "internal error: an output tensor is missing");
	row = c_main->base + j * (uint64_t)f->max_steps * step_bytes;
	if (nsteps > (uint64_t)f->max_steps)
		return fail_feature(f, "%llu steps, more than max_steps %lld",
				    (unsigned long long)nsteps, (long long)f->max_steps);
	for (uint64_t s = 0; s < nsteps; s++) {
		const struct bfs_values *v = &fl->steps[s];
		uint8_t *dst = row + s * step_bytes;

		if (v->kind == BFS_KIND_NONE || v->count == 0)
			continue;
		if (v->kind != f->kind)
			return fail_feature(f, "step %llu is %s, schema says %s",
					    (unsigned long long)s, bfs_kind_name(v->kind),
					    bfs_kind_name(f->kind));
		if (f->kind != BFS_KIND_BYTES) {
			if (v->count > per_step)
				return fail_feature(f, "step %llu has %zu values, more than %llu",
						    (unsigned long long)s, v->count,
						    (unsigned long long)per_step);
			put_values(dst, v);
			continue;
		}
		/* bytes: shape [max_bytes] or [max_values, max_bytes] */
		uint64_t max_bytes = (uint64_t)f->shape[f->ndim - 1];
		uint64_t max_vals = f->ndim >= 2 ? (uint64_t)f->shape[0] : 1;
		if (v->count > max_vals)
			return fail_feature(f, "step %llu has %zu values, more than %llu",
					    (unsigned long long)s, v->count,
					    (unsigned long long)max_vals);
		for (size_t k = 0; k < v->count; k++) {
			if (v->b[k].len > max_bytes)
				return fail_feature(
					f, "step %llu value %zu is %zu bytes, more than %llu",
					(unsigned long long)s, k, v->b[k].len,
					(unsigned long long)max_bytes);
			memcpy(dst + k * max_bytes, v->b[k].data, v->b[k].len);
			int32_put(c_vlen->base, (j * (uint64_t)f->max_steps + s) * max_vals + k,
				  v->b[k].len);
		}
	}
	return int32_put(c_len->base, j, nsteps);
}

/* Fill row j from one decoded record, driving each spec once: from a bound
 * decode (bd) or, for the shapes only the reference decoder takes, from a
 * whole decoded example (ex). */
static int fill_driver(const struct bfs_batcher *b, const struct driver *dr, struct bfs_bind *bd,
		       const struct bfs_example *ex, uint64_t j, struct cursor *cur)
{
	const struct bfs_feature_spec *f = dr->spec;
	struct cursor *c_aux = dr->aux >= 0 ? &cur[dr->aux] : NULL;
	struct cursor *c_aux2 = dr->aux2 >= 0 ? &cur[dr->aux2] : NULL;

	if (dr->fixed_bytes) {
		const struct bfs_values *v =
			bd ? bfs_bind_values(bd, dr->key) : bfs_example_find(ex, f->name);
		if (v && v->kind == f->kind && v->count == dr->fixed_n) {
			uint8_t *dst = cur[dr->main].base + j * dr->fixed_bytes;
			const void *src =
				f->kind == BFS_KIND_FLOAT ? (const void *)v->f : (const void *)v->i;
			/* scalars: a fixed-size copy the compiler inlines */
			if (dr->fixed_bytes == 4)
				memcpy(dst, src, 4);
			else if (dr->fixed_bytes == 8)
				memcpy(dst, src, 8);
			else
				memcpy(dst, src, dr->fixed_bytes);
			return 0;
		}
		return fill_feature(f, v, j, &cur[dr->main], c_aux, c_aux2);
	}
	if (f->image)
		return fill_image(b, f,
				  bd ? bfs_bind_values(bd, dr->key) : bfs_example_find(ex, f->name),
				  j, &cur[dr->main]);
	if (f->is_list)
		return fill_list(
			f, bd ? bfs_bind_list(bd, dr->key) : bfs_example_find_list(ex, f->name), j,
			&cur[dr->main], c_aux, c_aux2);
	return fill_feature(f, bd ? bfs_bind_values(bd, dr->key) : bfs_example_find(ex, f->name), j,
			    &cur[dr->main], c_aux, c_aux2);
}

/* Fill row j from one decoded record, driving each spec once: from a bound
 * decode (bd) or, for the shapes only the reference decoder takes, from a
 * whole decoded example (ex). A bound decode has already written the
 * columns it could (bfs_bind_column): when it wrote every one, only the
 * other drivers are left. */
static int fill_row(const struct bfs_batcher *b, struct bfs_bind *bd, const struct bfs_example *ex,
		    uint64_t j, struct cursor *cur)
{
	int rc;

	if (bd && bfs_bind_nwritten(bd) == b->ncolumns) {
		for (size_t o = 0; o < b->nothers; o++)
			if ((rc = fill_driver(b, &b->drivers[b->others[o]], bd, ex, j, cur)))
				return rc;
		return 0;
	}
	for (size_t d = 0; d < b->ndrivers; d++) {
		const struct driver *dr = &b->drivers[d];

		if (bd && dr->col_kind != BFS_KIND_NONE && bfs_bind_written(bd, dr->key))
			continue;
		if ((rc = fill_driver(b, dr, bd, ex, j, cur)))
			return rc;
	}
	return 0;
}

static void name_record(const struct bfs_batcher *b, uint64_t rec)
{
	size_t sh;
	uint64_t local, off;

	bfs_dataset_locate(b->ds, rec, &sh, &local, &off);
	bfs_err_prefix("%s: record %llu at offset %llu",
		       bfs_shard_path(bfs_dataset_shard(b->ds, sh)), (unsigned long long)local,
		       (unsigned long long)off);
}

/* Decode and fill row j from raw record bytes (bound decoding, else the
 * whole example); the message names the record. */
static int fill_from_bytes(const struct bfs_batcher *b, struct bfs_bind *bd, uint64_t rec,
			   const uint8_t *data, uint32_t len, uint64_t j, struct cursor *cur)
{
	struct bfs_example *ex = NULL;
	int rc;

	bfs_bind_row(bd, j);
	rc = bfs_example_bind(bd, data, len);

	if (rc == 0) {
		rc = fill_row(b, bd, NULL, j, cur);
	} else if (rc == -EAGAIN && (rc = bfs_example_decode(&ex, data, len)) == 0) {
		rc = fill_row(b, NULL, ex, j, cur);
		bfs_example_free(ex);
	}
	if (rc)
		name_record(b, rec);
	return rc;
}

/* Where row j's ragged values start, taken before it is filled (one per
 * ragged tensor: b->ragged), so that a row that fails can be filled again
 * from another record. */
struct row_mark {
	uint64_t pos, nvals;
};

static void row_mark(const struct bfs_batcher *b, const struct cursor *cur, struct row_mark *m)
{
	for (size_t k = 0; k < b->nragged; k++) {
		m[k].pos = cur[b->ragged[k]].pos;
		m[k].nvals = cur[b->ragged[k]].nvals;
	}
}

/* Undo what a failed fill wrote to row j (a unit of g->batch rows): its
 * rows of the dense tensors zeroed (a padded value or a feature list is
 * written only as far as it goes, on zeros), the ragged cursors back where
 * the row starts and the values written past them zeroed. */
static void row_undo(const struct bfs_batcher *b, const struct bfs_geom *g, uint64_t j,
		     struct cursor *cur, const struct row_mark *m)
{
	const struct bfs_plan *p = b->plan;

	for (size_t t = 0; t < p->ntensors && g->batch; t++) {
		enum bfs_role r = p->t[t].role;
		uint64_t rb = g->g[t].nbytes / g->batch;

		if (r == BFS_ROLE_MAIN || r == BFS_ROLE_LENGTHS || r == BFS_ROLE_VALUE_LENGTHS)
			memset(cur[t].base + j * rb, 0, rb);
	}
	for (size_t k = 0; k < b->nragged; k++) {
		const struct bfs_tensor_tmpl *tm = &p->t[b->ragged[k]];
		struct cursor *c = &cur[b->ragged[k]];
		uint64_t isz =
			tm->spec->layout == BFS_LAYOUT_RAGGED ? bfs_dtype_size(tm->dtype) : 1;

		if (c->pos > m[k].pos)
			memset(c->base + m[k].pos * isz, 0, (c->pos - m[k].pos) * isz);
		c->pos = m[k].pos;
		c->nvals = m[k].nvals;
	}
}

/* Whether records x and y have the same ragged counts. */
static bool same_counts(const struct bfs_batcher *b, uint64_t x, uint64_t y)
{
	for (size_t s = 0; s < b->plan->nslots; s++)
		if (b->counts[s][x] != b->counts[s][y])
			return false;
	return true;
}

/* on_corrupt=skip: fill row j (undone: row_undo, m its mark) from the next
 * valid record after `bad` whose ragged counts equal those counted for
 * `bad` (any valid record when there is no ragged feature). The unit's
 * geometry was computed from those counts before anything was decoded, so
 * the substitute fills exactly the bytes the replaced record was given:
 * every size stat reported holds. A record the count pass could not
 * decode was counted as the next one it could (count_as_next), so that
 * one normally replaces it. */
static int fill_substitute(const struct bfs_batcher *b, const struct bfs_geom *g,
			   struct bfs_bind *bd, uint64_t bad, uint64_t j, struct cursor *cur,
			   const struct row_mark *m, uint8_t *rbuf, size_t cap,
			   bfs_corrupt_fn on_corrupt, void *ctx)
{
	unsigned tries = 0;
	int rc;

	for (uint64_t k = 1; k < b->nrecords && k <= SKIP_MAX_SCAN && tries < SKIP_MAX_TRIES; k++) {
		uint64_t rec = (bad + k) % b->nrecords;
		uint32_t len;

		if (b->plan->nslots && !same_counts(b, rec, bad))
			continue;
		tries++;
		rc = bfs_dataset_read(b->ds, rec, rbuf, cap, &len, b->o.verify);
		if (rc == 0)
			rc = fill_from_bytes(b, bd, rec, rbuf, len, j, cur);
		if (rc == 0)
			return 0;
		if (rc == -ENOMEM)
			return rc;
		if (on_corrupt)
			on_corrupt(ctx, bfs_err_msg(), true);
		row_undo(b, g, j, cur, m);
	}
	return bfs_err_set(-EIO, "no valid record%s to replace it among the next %llu",
			   b->plan->nslots ? " with the same ragged counts" : "",
			   (unsigned long long)(b->nrecords - 1 < SKIP_MAX_SCAN ? b->nrecords - 1
										: SKIP_MAX_SCAN));
}

/* ------------------------------------------------------ building in parts */

/* Rows of a part: at least this many, and parts of at least this many
 * output bytes, so that a part's fixed cost (a bind context, an arena, a
 * read_many call) stays small against its decoding. */
#define PART_MIN_ROWS 16
#define PART_MIN_BYTES ((uint64_t)128 << 10)

struct part {
	uint64_t j0, n; /* unit-local rows [j0, j0 + n) */
	/* nslots ragged totals of the unit's rows before j0, and before
	 * j0 + n: the next part's start (NULL: no ragged tensor) */
	const uint64_t *start, *end;
	int rc;
	char *msg; /* rc's message, copied from the thread that ran it */
};

struct bfs_build {
	const struct bfs_batcher *b;
	uint64_t epoch, unit, r0;
	size_t n;
	struct bfs_geom *g;
	uint8_t *data;
	uint64_t *recs; /* the global record of every row */
	unsigned nparts;
	struct part *parts;
	uint64_t *bounds; /* (nparts + 1) * nslots: totals before each part, then all */
};

void bfs_build_free(struct bfs_build *jb)
{
	if (!jb)
		return;
	for (unsigned k = 0; jb->parts && k < jb->nparts; k++)
		free(jb->parts[k].msg);
	free(jb->parts);
	free(jb->bounds);
	free(jb->recs);
	free(jb->data);
	bfs_geom_free(jb->g);
	free(jb);
}

unsigned bfs_build_parts_for(const struct bfs_geom *g, unsigned max)
{
	uint64_t by_rows = g->batch / PART_MIN_ROWS, by_bytes = g->st_size / PART_MIN_BYTES;
	uint64_t k = by_rows < by_bytes ? by_rows : by_bytes;

	return k < 1 ? 1 : k > max ? max : (unsigned)k;
}

int bfs_build_new(struct bfs_build **out, const struct bfs_batcher *b, uint64_t epoch,
		  uint64_t unit, struct bfs_geom *g, unsigned nparts)
{
	return bfs_build_new_in(out, b, epoch, unit, g, nparts, NULL);
}

int bfs_build_new_in(struct bfs_build **out, const struct bfs_batcher *b, uint64_t epoch,
		     uint64_t unit, struct bfs_geom *g, unsigned nparts, uint8_t *buf)
{
	const struct bfs_plan *p = b->plan;
	size_t nslots = p->nslots;
	struct bfs_build *jb = calloc(1, sizeof(*jb));
	struct bfs_perm perm;
	uint64_t rows = 0;
	int rc;

	*out = NULL;
	if (!jb) {
		bfs_geom_free(g);
		free(buf);
		return -ENOMEM;
	}
	jb->data = buf; /* freed with the job from here on */
	jb->b = b;
	jb->epoch = epoch;
	jb->unit = unit;
	jb->g = g;
	if (!jb->g && (rc = bfs_batcher_geom(&jb->g, b, epoch, unit)) != 0) {
		bfs_build_free(jb);
		return rc;
	}
	if (bfs_batcher_unit_rows(b, unit, &jb->r0, &rows) != 0 || rows != jb->g->batch) {
		bfs_build_free(jb);
		return -ENOENT;
	}
	jb->n = (size_t)rows;
	if (nparts < 1 || rows == 0)
		nparts = 1;
	else if (nparts > rows)
		nparts = (unsigned)rows;
	jb->nparts = nparts;
	if (jb->data)
		memset(jb->data, 0, jb->g->st_size);
	else
		jb->data = calloc(1, jb->g->st_size ? jb->g->st_size : 1);
	jb->recs = malloc((jb->n ? jb->n : 1) * sizeof(*jb->recs));
	jb->parts = calloc(jb->nparts, sizeof(*jb->parts));
	jb->bounds = calloc(((size_t)jb->nparts + 1) * (nslots ? nslots : 1), sizeof(uint64_t));
	if (!jb->data || !jb->recs || !jb->parts || !jb->bounds) {
		rc = bfs_err_set(-ENOMEM, "out of memory for a batch of %llu bytes",
				 (unsigned long long)jb->g->st_size);
		bfs_build_free(jb);
		return rc;
	}
	memcpy(jb->data, jb->g->st_header, jb->g->st_hlen);
	rc = bfs_batcher_perm(b, epoch, &perm);
	if (rc) {
		bfs_build_free(jb);
		return rc;
	}
	bfs_batcher_row_records(b, &perm, jb->r0, jb->n, jb->recs);
	bfs_perm_release(&perm);
	/* each part starts its ragged cursors where the rows before it end,
	 * as the index counted them */
	for (unsigned k = 0; k < jb->nparts; k++) {
		struct part *pt = &jb->parts[k];
		uint64_t *end = jb->bounds + ((size_t)k + 1) * nslots;

		pt->j0 = k ? pt[-1].j0 + pt[-1].n : 0;
		pt->n = (uint64_t)jb->n * (k + 1) / jb->nparts - pt->j0;
		if (!nslots)
			continue;
		pt->start = end - nslots;
		pt->end = end;
		memcpy(end, pt->start, nslots * sizeof(uint64_t));
		for (uint64_t j = pt->j0; j < pt->j0 + pt->n; j++)
			for (size_t s = 0; s < nslots; s++)
				end[s] += b->counts[s][jb->recs[j]];
	}
	*out = jb;
	return 0;
}

const uint64_t *bfs_build_records(const struct bfs_build *jb, size_t *n)
{
	*n = jb->n;
	return jb->recs;
}

unsigned bfs_build_nparts(const struct bfs_build *jb)
{
	return jb->nparts;
}

/* The write cursors of part pt: fixed-size tensors address rows directly;
 * a ragged tensor starts at its part's first value and may not write past
 * its part's last, so parts never touch each other's bytes, even when a
 * record no longer holds what the index counted. */
static void part_cursors(const struct bfs_build *jb, const struct part *pt, struct cursor *cur)
{
	const struct bfs_plan *p = jb->b->plan;

	for (size_t t = 0; t < p->ntensors; t++) {
		const struct bfs_tensor_tmpl *tm = &p->t[t];
		int s = tm->ragged_slot;

		cur[t].base = jb->data + jb->g->g[t].offset;
		cur[t].nbytes = jb->g->g[t].nbytes;
		cur[t].pos = cur[t].nvals = 0;
		if (s < 0 || !pt->start)
			continue;
		if (tm->spec->layout == BFS_LAYOUT_RAGGED && tm->role == BFS_ROLE_VALUES) {
			cur[t].pos = pt->start[s];
			cur[t].nbytes = pt->end[s] * bfs_dtype_size(tm->dtype);
		} else if (tm->spec->layout == BFS_LAYOUT_RAGGED2 && tm->role == BFS_ROLE_VALUES) {
			cur[t].nvals = pt->start[s];
			cur[t].pos = pt->start[s + 1];
			cur[t].nbytes = pt->end[s + 1];
		} else if (tm->spec->layout == BFS_LAYOUT_RAGGED2 &&
			   tm->role == BFS_ROLE_VALUE_SPLITS) {
			cur[t].nbytes = (pt->end[s] + 1) * 8;
		}
	}
}

/* Ragged tensors must be filled exactly as the index counted. */
static int part_check(const struct bfs_build *jb, const struct part *pt, const struct cursor *cur)
{
	const struct bfs_plan *p = jb->b->plan;

	for (size_t t = 0; pt->end && t < p->ntensors; t++) {
		const struct bfs_tensor_tmpl *tm = &p->t[t];
		int s = tm->ragged_slot;
		uint64_t want, got;

		if (tm->role != BFS_ROLE_VALUES)
			continue;
		if (tm->spec->layout == BFS_LAYOUT_RAGGED) {
			want = pt->end[s];
			got = cur[t].pos;
		} else {
			want = pt->end[s + 1];
			got = cur[t].pos;
			if (got == want && cur[t].nvals != pt->end[s])
				want = ~got; /* as many bytes, another count of values */
		}
		if (got != want)
			return bfs_err_set(
				-EIO,
				"feature '%s': rows %llu..%llu of epoch %llu hold other values "
				"than the index counted (source changed?)",
				tm->spec->name, (unsigned long long)(jb->r0 + pt->j0),
				(unsigned long long)(jb->r0 + pt->j0 + pt->n - 1),
				(unsigned long long)jb->epoch);
	}
	return 0;
}

/* Bytes of records read and then filled together (plain shards): a wide or
 * image batch holds megabytes of records, which filled after the whole
 * batch was read come back from memory rather than from L2. */
#define READ_CHUNK ((uint64_t)256 << 10)

static int run_part(struct bfs_build *jb, struct part *pt, bfs_corrupt_fn on_corrupt, void *ctx)
{
	const struct bfs_batcher *b = jb->b;
	const struct bfs_plan *p = b->plan;
	size_t n = (size_t)pt->n;
	const uint64_t *recs = jb->recs + pt->j0;
	struct cursor *cur = calloc(p->ntensors ? p->ntensors : 1, sizeof(*cur));
	uint32_t cap = bfs_dataset_max_record_len(b->ds);
	uint8_t *rbuf = malloc(cap ? cap : 1), *arena = NULL;
	uint32_t *lens = malloc((n ? n : 1) * sizeof(*lens));
	uint8_t **dst = malloc((n ? n : 1) * sizeof(*dst));
	int *errs = malloc((n ? n : 1) * sizeof(*errs));
	char **msgs = calloc(n ? n : 1, sizeof(*msgs));
	struct row_mark *marks = calloc(b->nragged ? b->nragged : 1, sizeof(*marks));
	struct bfs_bind *bd = NULL;
	uint64_t arena_size = 0;
	int rc;

	if (!cur || !rbuf || !lens || !dst || !errs || !msgs || !marks ||
	    bfs_bind_new(&bd, b->ctx_keys, b->nctx_keys, b->list_keys, b->nlist_keys))
		goto nomem;
	part_cursors(jb, pt, cur);
	for (size_t d = 0; d < b->ndrivers; d++) {
		const struct driver *dr = &b->drivers[d];
		if (dr->col_kind != BFS_KIND_NONE)
			bfs_bind_column(bd, dr->key, dr->col_kind, dr->col_n, cur[dr->main].base);
	}
	/* read, then fill, a chunk of rows at a time: each chunk's records are
	 * read into the arena in file order (a compressed shard is inflated
	 * once per run of nearby records), then filled in row order (ragged
	 * values are appended row by row) while they are still in the caches */
	bfs_dataset_record_lens(b->ds, recs, n, lens);
	for (size_t i0 = 0, i1; i0 < n; i0 = i1) {
		uint64_t bytes = 0;

		for (i1 = i0; i1 < n && (i1 == i0 || !b->plain || bytes + lens[i1] <= READ_CHUNK);
		     i1++)
			bytes += lens[i1];
		if (!arena || bytes > arena_size) { /* empty records too: dst needs a base */
			free(arena);
			arena_size = bytes;
			if (!(arena = malloc(arena_size ? arena_size : 1)))
				goto nomem;
		}
		for (size_t j = i0, off = 0; j < i1; j++) {
			dst[j] = arena + off;
			off += lens[j];
		}
		rc = bfs_dataset_read_many(b->ds, recs + i0, i1 - i0, dst + i0, b->o.verify,
					   errs + i0, msgs + i0);
		if (rc)
			goto out;
		for (size_t i = i0; i < i1; i++) {
			uint64_t j = pt->j0 + i;

			if (b->nragged)
				row_mark(b, cur, marks);
			if (errs[i] == 0)
				rc = fill_from_bytes(b, bd, recs[i], dst[i], lens[i], j, cur);
			else
				rc = bfs_err_set(errs[i], "%s", msgs[i] ? msgs[i] : "read failed");
			if (rc == 0)
				continue;
			/* out of memory, or the mount ending (the I/O stage
			 * stopped): nothing wrong with the record */
			if (rc == -ENOMEM || rc == -ESHUTDOWN)
				goto out;
			if (b->o.on_corrupt == BFS_ON_CORRUPT_SKIP) {
				char *why = strdup(bfs_err_msg());

				if (!why)
					goto nomem;
				row_undo(b, jb->g, j, cur, marks);
				rc = fill_substitute(b, jb->g, bd, recs[i], j, cur, marks, rbuf,
						     cap, on_corrupt, ctx);
				if (rc == 0 && on_corrupt)
					on_corrupt(ctx, why, true);
				if (rc && rc != -ENOMEM) {
					char none[256];

					snprintf(none, sizeof(none), "%s", bfs_err_msg());
					rc = bfs_err_set(-EIO, "%s (on_corrupt=skip: %s)", why,
							 none);
				}
				free(why);
				if (rc == 0)
					continue;
				if (rc == -ENOMEM)
					goto out;
			}
			if (on_corrupt)
				on_corrupt(ctx, bfs_err_msg(), false);
			rc = -EIO;
			goto out;
		}
	}
	rc = part_check(jb, pt, cur);
	if (rc && on_corrupt)
		on_corrupt(ctx, bfs_err_msg(), false);
	goto out;
nomem:
	rc = bfs_err_set(-ENOMEM, "out of memory for a batch of %llu bytes",
			 (unsigned long long)jb->g->st_size);
out:
	for (size_t j = 0; msgs && j < n; j++)
		free(msgs[j]);
	free(msgs);
	free(marks);
	free(errs);
	free(dst);
	free(lens);
	free(arena);
	free(cur);
	free(rbuf);
	bfs_bind_free(bd);
	return rc;
}

int bfs_build_part(struct bfs_build *jb, unsigned k, bfs_corrupt_fn on_corrupt, void *ctx)
{
	struct part *pt = &jb->parts[k];

	pt->rc = run_part(jb, pt, on_corrupt, ctx);
	if (pt->rc)
		pt->msg = strdup(bfs_err_msg());
	return pt->rc;
}

int bfs_build_finish(struct bfs_build *jb, uint8_t **out, struct bfs_geom **out_geom)
{
	int rc = 0;

	for (unsigned k = 0; k < jb->nparts && !rc; k++)
		if (jb->parts[k].rc) {
			rc = jb->parts[k].rc;
			bfs_err_format("%s", jb->parts[k].msg ? jb->parts[k].msg : "");
		}
	if (rc == 0) {
		*out = jb->data;
		*out_geom = jb->g;
		jb->data = NULL;
		jb->g = NULL;
	}
	bfs_build_free(jb);
	return rc;
}

int bfs_batcher_build(uint8_t **out, struct bfs_geom **out_geom, const struct bfs_batcher *b,
		      uint64_t epoch, uint64_t batch, bfs_corrupt_fn on_corrupt, void *ctx)
{
	struct bfs_build *jb;
	struct bfs_geom *g = *out_geom; /* the caller may have computed it already */
	int rc;

	*out_geom = NULL;
	rc = bfs_build_new(&jb, b, epoch, batch, g, 1);
	if (rc)
		return rc;
	bfs_build_part(jb, 0, on_corrupt, ctx);
	return bfs_build_finish(jb, out, out_geom);
}
