/* SPDX-License-Identifier: Apache-2.0 */
/*
 * batch_build.c — building a unit (a batch, or a chunk of all/) in parts:
 * consecutive rows, each part starting its ragged cursors where the rows
 * before it end (from the counts), so that any thread may build any part
 * and parts never touch each other's bytes. A part reads its records a
 * chunk at a time, in file order, then fills them in row order.
 */
#include "batch_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* A mixture's _source (int32) and _record (int64) of row j (unit-local),
 * from its record number (docs/contract.md, Mixtures): written before the
 * parts run, and again after a substitute's fill (the undo of the row
 * zeroed them), so they always name the record the order put there. */
static void write_provenance_row(const struct bfs_build *jb, uint64_t j)
{
	const struct bfs_batcher *b = jb->b;
	int ts = b->prov_t[0], tr = b->prov_t[1];
	uint64_t local;
	size_t s;

	if (!b->o.mix || (ts < 0 && tr < 0))
		return;
	bfs_mix_source_of(b->o.mix, jb->recs[j], &s, &local);
	if (ts >= 0) {
		int32_t v = (int32_t)s;
		memcpy(jb->data + jb->g->g[ts].offset + j * 4, &v, 4);
	}
	if (tr >= 0) {
		int64_t v = (int64_t)local;
		memcpy(jb->data + jb->g->g[tr].offset + j * 8, &v, 8);
	}
}

static void write_provenance(const struct bfs_build *jb)
{
	for (size_t j = 0; jb->b->o.mix && j < jb->n; j++)
		write_provenance_row(jb, j);
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
	write_provenance(jb);
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

static int cmp_u64_at(const void *a, const void *b, void *ctx)
{
	const uint64_t *v = ctx;
	uint64_t x = v[*(const size_t *)a], y = v[*(const size_t *)b];

	return x < y ? -1 : x > y;
}

/* A mixture's batch may hold a record twice (a source smaller than the
 * batch repeats in its next pass); the dataset reads each record once, so
 * the repeats are copies of the first read. */
static int read_unique(const struct bfs_batcher *b, const uint64_t *recs, size_t n,
		       uint8_t *const *dst, const uint32_t *lens, int *errs, char **msgs)
{
	size_t *ix = malloc((n ? n : 1) * sizeof(*ix)),
	       *first = malloc((n ? n : 1) * sizeof(*first));
	uint64_t *u = malloc((n ? n : 1) * sizeof(*u));
	uint8_t **ud = malloc((n ? n : 1) * sizeof(*ud));
	size_t nu = 0;
	int rc = -ENOMEM;

	if (!ix || !first || !u || !ud)
		goto out;
	for (size_t i = 0; i < n; i++)
		ix[i] = i;
	qsort_r(ix, n, sizeof(*ix), cmp_u64_at, (void *)recs);
	for (size_t k = 0; k < n; k++) {
		size_t i = ix[k];

		if (k > 0 && recs[ix[k - 1]] == recs[i]) {
			first[i] = first[ix[k - 1]];
			continue;
		}
		first[i] = i;
		u[nu] = recs[i];
		ud[nu++] = dst[i];
	}
	if (nu == n) {
		rc = bfs_dataset_read_many(b->ds, recs, n, dst, b->o.verify, errs, msgs);
		goto out;
	}
	{
		int *ue = malloc(nu * sizeof(*ue));
		char **um = calloc(nu, sizeof(*um));

		if (!ue || !um) {
			free(ue);
			free(um);
			goto out;
		}
		rc = bfs_dataset_read_many(b->ds, u, nu, ud, b->o.verify, ue, um);
		for (size_t k = 0, q = 0; !rc && k < n; k++) {
			size_t i = ix[k], f = first[i];

			if (f == i) { /* the first of its record: the q-th read */
				errs[i] = ue[q];
				msgs[i] = um[q];
				um[q++] = NULL;
				continue;
			}
			errs[i] = errs[f];
			msgs[i] = msgs[f] ? strdup(msgs[f]) : NULL;
			if (errs[i] == 0)
				memcpy(dst[i], dst[f], lens[i]);
		}
		for (size_t q = 0; q < nu; q++)
			free(um[q]);
		free(ue);
		free(um);
	}
out:
	free(ix);
	free(first);
	free(u);
	free(ud);
	return rc;
}

static int part_nomem(const struct bfs_build *jb)
{
	return bfs_err_set(-ENOMEM, "out of memory for a batch of %llu bytes",
			   (unsigned long long)jb->g->st_size);
}

/* Row j (record rec) failed with rc (`how` it failed, for a read): with
 * on_corrupt=skip, a substitute record fills it instead (0); else the
 * error that ends the part, reported to on_corrupt. Out of memory and the
 * mount ending (the I/O stage stopped) end the part as they are: nothing
 * is wrong with the record. */
static int row_failed(struct bfs_build *jb, struct bfs_bind *bd, uint64_t rec, uint64_t j, int rc,
		      unsigned how, struct cursor *cur, struct row_mark *marks, uint8_t *rbuf,
		      uint32_t cap, bfs_corrupt_fn on_corrupt, void *ctx)
{
	const struct bfs_batcher *b = jb->b;

	if (rc == -ENOMEM || rc == -ESHUTDOWN)
		return rc;
	if (b->o.on_corrupt == BFS_ON_CORRUPT_SKIP) {
		char *why = strdup(bfs_err_msg());

		if (!why)
			return part_nomem(jb);
		bfs_batcher_row_undo(b, jb->g, j, cur, marks);
		rc = bfs_batcher_fill_substitute(b, jb->g, bd, jb->epoch, rec, j, cur, marks, rbuf,
						 cap, on_corrupt, ctx);
		if (rc == 0)
			write_provenance_row(jb, j);
		if (rc == 0 && on_corrupt)
			on_corrupt(ctx, why, BFS_REPORT_SKIPPED | how);
		if (rc && rc != -ENOMEM) {
			char none[256];

			snprintf(none, sizeof(none), "%s", bfs_err_msg());
			rc = bfs_err_set(-EIO, "%s (on_corrupt=skip: %s)", why, none);
		}
		free(why);
		if (rc == 0 || rc == -ENOMEM)
			return rc;
	}
	if (on_corrupt)
		on_corrupt(ctx, bfs_err_msg(), how);
	return -EIO;
}

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
		rc = b->o.mix ? read_unique(b, recs + i0, i1 - i0, dst + i0, lens + i0, errs + i0,
					    msgs + i0)
			      : bfs_dataset_read_many(b->ds, recs + i0, i1 - i0, dst + i0,
						      b->o.verify, errs + i0, msgs + i0);
		if (rc)
			goto out;
		for (size_t i = i0; i < i1; i++) {
			uint64_t j = pt->j0 + i;
			unsigned how = errs[i] ? bfs_read_failure(errs[i]) : 0;

			if (b->nragged)
				bfs_batcher_row_mark(b, cur, marks);
			if (errs[i] == 0)
				rc = bfs_batcher_fill_row(b, bd, jb->epoch, recs[i], dst[i],
							  lens[i], j, cur);
			else
				rc = bfs_err_set(errs[i], "%s", msgs[i] ? msgs[i] : "read failed");
			if (rc == 0)
				continue;
			rc = row_failed(jb, bd, recs[i], j, rc, how, cur, marks, rbuf, cap,
					on_corrupt, ctx);
			if (rc)
				goto out;
		}
	}
	rc = part_check(jb, pt, cur);
	if (rc && on_corrupt)
		on_corrupt(ctx, bfs_err_msg(), 0);
	goto out;
nomem:
	rc = part_nomem(jb);
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
