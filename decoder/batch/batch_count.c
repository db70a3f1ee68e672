/* SPDX-License-Identifier: Apache-2.0 */
/*
 * batch_count.c — the ragged count pass: how many values (and bytes) of
 * each ragged feature every record holds, which fixes every batch's size
 * before any is decoded. Counts come from index_dir (cntcache.h) where
 * cached, else from the scan that just indexed a bucket's object (dataset.h,
 * bfs_dataset_scan_counts: reading it again would fetch it again); the
 * other shards' records are decoded once, split into one share per job
 * over bfs_pfor, and their counts cached. A record that cannot be
 * counted takes the counts of the next one that can (count_as_next).
 */
#include "batch_impl.h"

#include "cntcache.h"
#include "pfor.h"

#include <stdlib.h>
#include <string.h>

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
 * bfs_batcher_fill_substitute). Count it as the next record that can be
 * counted, so that this record normally replaces it; 0 if none is found
 * among the next SKIP_MAX_TRIES. A run of such records is searched once
 * (memo). */
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

/* The count pass reads the records of one shard in blocks of neighbours
 * (bfs_dataset_read_many: one read per run of adjacent records): a source
 * that charges per read (an object store: a GET each) is paid per block, not
 * per record. */
#define COUNT_BLOCK 512
#define COUNT_BLOCK_BYTES ((uint64_t)1 << 20)

struct count_block {
	uint64_t recs[COUNT_BLOCK];
	uint32_t lens[COUNT_BLOCK];
	uint8_t *dst[COUNT_BLOCK];
	int errs[COUNT_BLOCK];
	char *msgs[COUNT_BLOCK];
	uint8_t *mem;
	size_t cap;
};

/* Read records r .. r + n - 1 (one shard) from where they fit in
 * COUNT_BLOCK_BYTES (at least one): how many were read (errs says which
 * failed); 0 when out of memory. */
static size_t count_block_read(const struct bfs_batcher *b, struct count_block *cb, uint64_t r,
			       uint64_t n)
{
	uint64_t bytes = 0;
	size_t m = 0;

	if (n > COUNT_BLOCK)
		n = COUNT_BLOCK;
	for (uint64_t t = 0; t < n; t++)
		cb->recs[t] = r + t;
	bfs_dataset_record_lens(b->ds, cb->recs, (size_t)n, cb->lens);
	for (; m < n; m++) {
		uint64_t len = cb->lens[m] ? cb->lens[m] : 1;

		if (m > 0 && bytes + len > COUNT_BLOCK_BYTES)
			break;
		bytes += len;
	}
	if (bytes > cb->cap) {
		uint8_t *mem = realloc(cb->mem, bytes);

		if (!mem)
			return 0;
		cb->mem = mem;
		cb->cap = bytes;
	}
	bytes = 0;
	for (size_t t = 0; t < m; t++) {
		cb->dst[t] = cb->mem + bytes;
		bytes += cb->lens[t] ? cb->lens[t] : 1;
	}
	if (bfs_dataset_read_many(b->ds, cb->recs, m, cb->dst, false, cb->errs, cb->msgs) != 0)
		return 0;
	for (size_t t = 0; t < m; t++) {
		free(cb->msgs[t]);
		cb->msgs[t] = NULL;
	}
	return m;
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
	struct count_block *cb = calloc(1, sizeof(*cb));
	struct count_memo memo = { 0 };
	size_t k = 0;
	int rc = 0;

	if (!buf || !cb) {
		free(buf);
		free(cb);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	for (uint64_t pos = lo; pos < hi;) {
		uint64_t r, left;
		size_t m;

		while (pos >= cp->segs[k].pos + cp->segs[k].n)
			k++;
		r = cp->segs[k].first + (pos - cp->segs[k].pos);
		left = cp->segs[k].pos + cp->segs[k].n - pos; /* in this shard */
		if (left > hi - pos)
			left = hi - pos;
		m = count_block_read(b, cb, r, left);
		if (m == 0) {
			rc = bfs_err_set(-ENOMEM, "out of memory");
			break;
		}
		for (size_t t = 0; t < m; t++) {
			struct bfs_example *ex = NULL;

			/* A record that cannot be counted takes the counts of
			 * the next one; reading its batch reports it. Its
			 * shard's counts are not cached (the failure may not
			 * last, and the next record may lie in another shard). */
			if (!cb->errs[t] && bfs_example_decode(&ex, cb->dst[t], cb->lens[t]) == 0) {
				bool ok = countable(b, ex);

				if (ok)
					count_record(b, r + t, ex);
				bfs_example_free(ex);
				if (ok)
					continue;
			}
			count_as_next(b, r + t, buf, cap, &memo);
			__atomic_store_n(&cp->failed[cp->segs[k].shard], true, __ATOMIC_RELAXED);
		}
		pos += m;
	}
	free(cb->mem);
	free(cb);
	free(buf);
	return rc;
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

/* Shard i's counts as its scan kept them (bfs_dataset_scan_counts: a
 * bucket's object that the pass would read again), n records of each
 * ragged slot into cols; false when the scan kept not all of them. */
static bool scan_counts_take(const struct bfs_batcher *b, size_t i, uint64_t n, uint32_t **cols)
{
	const struct bfs_plan *p = b->plan;

	for (size_t t = 0; t < p->ntensors; t++) {
		const struct bfs_tensor_tmpl *tm = &p->t[t];
		const uint32_t *nv, *nb;

		if (tm->role != BFS_ROLE_VALUES)
			continue;
		if (tm->spec->layout != BFS_LAYOUT_RAGGED2 ||
		    !bfs_dataset_scan_counts(b->ds, i, tm->spec->name, &nv, &nb))
			return false;
		memcpy(cols[tm->ragged_slot], nv, n * sizeof(*nv));
		memcpy(cols[tm->ragged_slot + 1], nb, n * sizeof(*nb));
	}
	return true;
}

/* The columns of the shard whose first record is `first`. */
static void cols_at(const struct bfs_batcher *b, uint64_t first, uint32_t **cols)
{
	for (size_t s = 0; s < b->plan->nslots; s++)
		cols[s] = b->counts[s] + first;
}

int bfs_batcher_count(struct bfs_batcher *b)
{
	size_t nslots = b->plan->nslots, nshards = bfs_dataset_nshards(b->ds), nsegs = 0;
	struct bfs_cntcache *cc = NULL; /* the cache (cntcache.h); NULL: none */
	struct count_seg *segs = NULL;
	struct count_pass cp = { .b = b };
	bool *scanned = NULL; /* [nshards]: counts taken from the scan */
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
	scanned = calloc(nshards ? nshards : 1, sizeof(*scanned));
	cols = calloc(nslots, sizeof(*cols));
	if (!segs || !cp.failed || !scanned || !cols ||
	    (b->o.index_dir && bfs_cntcache_new(&cc, b->ds, b->plan, b->o.index_dir, b->o.on_note,
						b->o.note_ctx) == -ENOMEM))
		goto out;
	for (size_t i = 0; i < nshards; i++) {
		uint64_t n = bfs_shard_nrecords(bfs_dataset_shard(b->ds, i));

		cols_at(b, first, cols);
		if (n && !(cc && bfs_cntcache_load(cc, i, cols))) {
			scanned[i] = scan_counts_take(b, i, n, cols);
			if (!scanned[i]) {
				segs[nsegs++] = (struct count_seg){ first, n, total, i };
				total += n;
			}
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
	first = 0;
	for (size_t i = 0; !rc && cc && i < nshards; i++) { /* the scan's, cached too */
		if (scanned[i]) {
			cols_at(b, first, cols);
			bfs_cntcache_put(cc, i, (const uint32_t *const *)cols);
		}
		first += bfs_shard_nrecords(bfs_dataset_shard(b->ds, i));
	}
	if (!rc) /* the small shards' counts: one write per pack */
		bfs_cntcache_save(cc);
out:
	bfs_cntcache_free(cc);
	free(cols);
	free(scanned);
	free(cp.failed);
	free(segs);
	return rc;
}
