/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dataset.c — a dataset (see dataset.h): opening SOURCE (its shards
 * resolved, opened, their indexes loaded from index_dir or scanned, the
 * schema cached or inferred), closing it, its accessors, and reading
 * records by their global number (each shard's records in file order).
 *
 * SOURCE to paths is dataset_source.c, index_dir dataset_cache.c, the scan
 * dataset_scan.c, the I/O stage dataset_io.c (see dataset_impl.h).
 */
#include "dataset_impl.h"

#include "objsrc.h"
#include "shadow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bfs_dataset_close(struct bfs_dataset *ds)
{
	if (!ds)
		return;
	if (ds->borrowed) {
		bfs_dataset_union_free(ds);
		return;
	}
	for (size_t i = 0; i < ds->nshards; i++)
		bfs_shard_close(ds->shards[i]);
	bfs_objsrc_free(ds->objs); /* after the shards: they read through it */
	bfs_source_free(ds->passed, ds->npassed);
	bfs_shadows_free(ds->shadows); /* after the shards: their copies report to it */
	for (size_t i = 0; ds->cut && i < ds->nshards; i++)
		free(ds->cut[i]);
	free(ds->cut);
	free(ds->shards);
	free(ds->first);
	for (size_t i = 0; ds->abs && i < ds->nshards; i++)
		free(ds->abs[i]);
	free(ds->abs);
	bfs_dataset_free_packs(ds);
	free(ds->pack_of);
	bfs_schema_free(ds->schema);
	free(ds->mixed);
	bfs_dataset_scan_counts_drop(ds);
	free(ds);
}

/* Shadow copies (shadow.h): the set over index_dir; an indexed compressed
 * shard without a valid copy is scanned again to write one, when the copy
 * would fit. */
static int shadows_open(struct bfs_dataset *ds, const struct bfs_dataset_opts *o, bool *need,
			bool *any_scan)
{
	struct bfs_shadow_opts so = {
		.dir = o->index_dir,
		.budget = o->shadow_size,
		.note = o->on_note,
		.ctx = o->progress_ctx,
	};
	int rc;

	if (!o->index_dir || !o->shadow_size)
		return 0;
	rc = bfs_shadows_new(&ds->shadows, &so);
	for (size_t i = 0; !rc && i < ds->nshards; i++) {
		if (!need[i] && bfs_shadow_wanted(ds->shadows, ds->shards[i])) {
			need[i] = true;
			ds->index_reused = false;
			*any_scan = true;
		}
	}
	return rc;
}

/* What bfs_dataset_open works with until the dataset is whole: SOURCE's
 * shard paths, and per shard whether its index must be scanned (need),
 * came from index_dir (cached), was scanned into a good index (scanned). */
struct open_state {
	char **paths;
	size_t npaths;
	bool *need, *cached, *scanned;
	bool any_scan, lazy;
	char sfile[PATH_MAX + 64];
};

/* SOURCE's shard paths (a bucket's objects listed through ds->objs). */
static int dataset_list(struct bfs_dataset *ds, struct open_state *st, const char *source,
			const struct bfs_dataset_opts *o)
{
	int rc;

	if (!bfs_s3_url_is(source))
		return bfs_source_resolve(&st->paths, &st->npaths, source, o->follow_symlinks);
	rc = bfs_objsrc_new(&ds->objs, source, o->s3, o->s3_conns);
	if (!rc)
		rc = bfs_objsrc_list(ds->objs, bfs_source_not_shard, &st->paths, &st->npaths,
				     &ds->passed, &ds->npassed);
	return rc;
}

/* The per-shard arrays of ds and st, for st->npaths shards. */
static int dataset_alloc(struct bfs_dataset *ds, struct open_state *st,
			 const struct bfs_dataset_opts *o)
{
	size_t n = st->npaths;

	/* an array of pointers: sizeof(struct bfs_shard *) is meant */
	ds->shards = calloc(n, sizeof(*ds->shards)); /* NOLINT(bugprone-sizeof-expression) */
	ds->first = calloc(n + 1, sizeof(*ds->first));
	ds->cut = calloc(n ? n : 1, sizeof(*ds->cut));
	st->need = calloc(n, sizeof(*st->need));
	st->cached = calloc(n, sizeof(*st->cached));
	st->scanned = calloc(n, sizeof(*st->scanned));
	ds->abs = o->index_dir ? calloc(n, sizeof(*ds->abs)) : NULL;
	ds->pack_of = o->index_dir ? calloc(n, sizeof(*ds->pack_of)) : NULL;
	if (!ds->shards || !ds->first || !ds->cut || !st->need || !st->cached || !st->scanned ||
	    (o->index_dir && (!ds->abs || !ds->pack_of)))
		return -ENOMEM;
	return 0;
}

/* Name shard path in the error message, unless it already does. */
static void err_name_path(const char *path)
{
	if (!strstr(bfs_err_msg(), path))
		bfs_err_prefix("%s", path);
}

/* Open every shard into ds->shards (ds->nshards of them); with st->lazy a
 * shard's compression is left to be detected once it is known to be
 * scanned. */
static int shards_open(struct bfs_dataset *ds, const struct open_state *st,
		       const struct bfs_dataset_opts *o)
{
	int rc;

	for (size_t i = 0; i < st->npaths; i++) {
		if (ds->objs) {
			/* an object opens undetected; without an index cache
			 * its compression is found (or set) now, as a file's */
			rc = bfs_objsrc_open_shard(ds->objs, i, &ds->shards[i]);
			if (!rc) {
				ds->nshards++;
				rc = st->lazy ? 0 : bfs_shard_detect(ds->shards[i], o->comp);
				if (!rc)
					continue;
				ds->nshards--;
				bfs_shard_close(ds->shards[i]);
				ds->shards[i] = NULL;
			}
		} else {
			rc = st->lazy ? bfs_shard_open_undetected(&ds->shards[i], st->paths[i])
				      : bfs_shard_open(&ds->shards[i], st->paths[i], o->comp);
		}
		if (rc) {
			err_name_path(st->paths[i]);
			return rc;
		}
		ds->nshards++;
	}
	return 0;
}

/* The indexes index_dir holds (st->cached); the others to scan (st->need),
 * their shards' compression detected now when it was left. */
static int indexes_load(struct bfs_dataset *ds, struct open_state *st,
			const struct bfs_dataset_opts *o)
{
	int rc;

	ds->index_reused = o->index_dir != NULL;
	if (o->index_dir)
		bfs_dataset_load_indexes(ds, o, st->need);
	else
		for (size_t i = 0; i < ds->nshards; i++)
			st->need[i] = true;
	for (size_t i = 0; i < ds->nshards; i++) {
		st->cached[i] = !st->need[i];
		if (st->need[i]) {
			ds->index_reused = false;
			st->any_scan = true;
		}
		if (st->need[i] && st->lazy) {
			rc = bfs_shard_detect(ds->shards[i], BFS_COMP_AUTO);
			if (rc) {
				err_name_path(st->paths[i]);
				return rc;
			}
		}
	}
	return 0;
}

/* With infer: the schema index_dir holds, or every shard to scan for it. */
static void schema_load(struct bfs_dataset *ds, struct open_state *st,
			const struct bfs_dataset_opts *o)
{
	if (!o->infer)
		return;
	if (o->index_dir) {
		bfs_dataset_schema_file(st->sfile, sizeof(st->sfile), o->index_dir, ds);
		if (bfs_dataset_schema_load(&ds->schema, st->sfile) == 0) {
			ds->schema_reused = true;
			ds->mixed = bfs_dataset_mixed_load(st->sfile);
		}
	}
	if (!ds->schema) {
		/* inference must see every record: scan all shards */
		for (size_t i = 0; i < ds->nshards; i++)
			st->need[i] = true;
		st->any_scan = true;
	}
}

/* Scan the shards st->need names; save their indexes (and the inferred
 * schema) to index_dir. */
static int scan_needed(struct bfs_dataset *ds, struct open_state *st,
		       const struct bfs_dataset_opts *o)
{
	int rc;

	ds->ix_dir_ok = o->index_dir && bfs_cache_dir_make(o->index_dir) == 0;
	rc = bfs_dataset_scan(ds, o, st->need, st->cached, st->scanned, o->infer && !ds->schema);
	/* the good indexes (also after a failed scan, as the files of their
	 * own are): scanned, or loaded and not scanned again */
	for (size_t i = 0; i < ds->nshards; i++)
		st->scanned[i] = st->scanned[i] || (st->cached[i] && !st->need[i]);
	bfs_dataset_save_packs(ds, o->index_dir, st->scanned, st->cached);
	if (rc)
		return rc;
	if (o->infer && o->index_dir && !ds->schema_reused) {
		bfs_dataset_schema_save(o->index_dir, st->sfile, ds->schema);
		bfs_dataset_mixed_save(st->sfile, ds->mixed);
	}
	return 0;
}

/* Each shard's first record number, the records in all and the longest,
 * from each index's header: no walk over the records. */
static void dataset_count(struct bfs_dataset *ds)
{
	for (size_t i = 0; i < ds->nshards; i++) {
		ds->first[i + 1] = ds->first[i] + bfs_shard_nrecords(ds->shards[i]);
		if (bfs_shard_max_len(ds->shards[i]) > ds->max_len)
			ds->max_len = bfs_shard_max_len(ds->shards[i]);
	}
	ds->nrecords = ds->first[ds->nshards];
}

int bfs_dataset_open(struct bfs_dataset **out, const char *source, const struct bfs_dataset_opts *o)
{
	struct bfs_dataset *ds = calloc(1, sizeof(*ds));
	struct open_state st = { 0 };
	int rc;

	if (!ds)
		return -ENOMEM;
	rc = dataset_list(ds, &st, source, o);
	if (!rc)
		rc = dataset_alloc(ds, &st, o);
	/* with an index cache, a shard's compression comes from its entry when
	 * there is one: detected only for the shards to scan */
	st.lazy = o->index_dir && o->comp == BFS_COMP_AUTO;
	if (!rc)
		rc = shards_open(ds, &st, o);
	if (!rc)
		rc = indexes_load(ds, &st, o);
	if (!rc)
		rc = shadows_open(ds, o, st.need, &st.any_scan);
	if (!rc) {
		schema_load(ds, &st, o);
		if (st.any_scan)
			rc = scan_needed(ds, &st, o);
	}
	if (rc)
		goto fail;
	for (size_t i = 0; ds->shadows && i < ds->nshards; i++)
		(void)bfs_shadow_attach(ds->shadows, ds->shards[i]);
	dataset_count(ds);
	bfs_dataset_free_packs(ds); /* their entries were copied */
	bfs_source_free(st.paths, st.npaths);
	free(st.need);
	free(st.cached);
	free(st.scanned);
	*out = ds;
	return 0;
fail:
	bfs_source_free(st.paths, st.npaths);
	free(st.need);
	free(st.cached);
	free(st.scanned);
	bfs_dataset_close(ds);
	return rc;
}

/* -------------------------------------------------------------- accessors */

size_t bfs_dataset_nshards(const struct bfs_dataset *ds)
{
	return ds->nshards;
}

struct bfs_shard *bfs_dataset_shard(const struct bfs_dataset *ds, size_t i)
{
	return i < ds->nshards ? ds->shards[i] : NULL;
}

uint64_t bfs_dataset_nrecords(const struct bfs_dataset *ds)
{
	return ds->nrecords;
}

uint32_t bfs_dataset_max_record_len(const struct bfs_dataset *ds)
{
	return ds->max_len;
}

const struct bfs_schema *bfs_dataset_schema(const struct bfs_dataset *ds)
{
	return ds->schema;
}

bool bfs_dataset_index_reused(const struct bfs_dataset *ds)
{
	return ds->index_reused;
}

const char *bfs_dataset_mixed(const struct bfs_dataset *ds)
{
	return ds->mixed;
}

bool bfs_dataset_schema_reused(const struct bfs_dataset *ds)
{
	return ds->schema_reused;
}

const char *bfs_dataset_cut(const struct bfs_dataset *ds, size_t i)
{
	return i < ds->nshards ? ds->cut[i] : NULL;
}

uint64_t bfs_dataset_bad_records(const struct bfs_dataset *ds)
{
	return ds->bad_records;
}

uint64_t bfs_dataset_index_bytes(const struct bfs_dataset *ds)
{
	uint64_t b = (ds->nshards + 1) * sizeof(uint64_t);

	for (size_t i = 0; i < ds->nshards; i++) {
		const struct bfs_index *ix = bfs_shard_get_index(ds->shards[i]);
		b += ix ? bfs_index_bytes(ix) : 0;
	}
	return b;
}

int bfs_dataset_locate(const struct bfs_dataset *ds, uint64_t rec, size_t *shard, uint64_t *local,
		       uint64_t *offset)
{
	size_t lo = 0, hi = ds->nshards;

	if (rec >= ds->nrecords)
		return -ENOENT;
	/* find the last shard whose first record <= rec */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (ds->first[mid] <= rec)
			lo = mid;
		else
			hi = mid;
	}
	while (lo + 1 < ds->nshards && ds->first[lo + 1] <= rec)
		lo++;
	*shard = lo;
	*local = rec - ds->first[lo];
	if (offset)
		*offset = bfs_index_offset(bfs_shard_get_index(ds->shards[lo]), *local);
	return 0;
}

uint32_t bfs_dataset_record_len(const struct bfs_dataset *ds, uint64_t rec)
{
	size_t sh;
	uint64_t local;

	if (bfs_dataset_locate(ds, rec, &sh, &local, NULL) != 0)
		return 0;
	return bfs_index_len(bfs_shard_get_index(ds->shards[sh]), local);
}

void bfs_dataset_record_lens(const struct bfs_dataset *ds, const uint64_t *recs, size_t n,
			     uint32_t *lens)
{
	enum { BLOCK = 64 };
	const struct bfs_index *ix[BLOCK];
	uint64_t local[BLOCK];

	/* In blocks: locate every record of the block, then look them up:
	 * the lookups are independent, so that the cache misses of random
	 * records overlap (a prefetch hint is dropped on a TLB miss:
	 * measured). */
	for (size_t i = 0; i < n; i += BLOCK) {
		size_t m = n - i < BLOCK ? n - i : BLOCK;
		for (size_t k = 0; k < m; k++) {
			size_t sh;
			ix[k] = NULL;
			if (bfs_dataset_locate(ds, recs[i + k], &sh, &local[k], NULL) == 0)
				ix[k] = bfs_shard_get_index(ds->shards[sh]);
		}
		for (size_t k = 0; k < m; k++)
			lens[i + k] = ix[k] ? bfs_index_len(ix[k], local[k]) : 0;
	}
}

int bfs_dataset_read(const struct bfs_dataset *ds, uint64_t rec, uint8_t *dst, size_t cap,
		     uint32_t *len, bool verify)
{
	size_t sh;
	uint64_t local, off;
	int rc = bfs_dataset_locate(ds, rec, &sh, &local, &off);

	if (rc)
		return bfs_err_set(rc, "record %llu out of range", (unsigned long long)rec);
	*len = bfs_index_len(bfs_shard_get_index(ds->shards[sh]), local);
	rc = bfs_shard_read(ds->shards[sh], local, dst, cap, verify);
	if (rc && !strstr(bfs_err_msg(), bfs_shard_path(ds->shards[sh])))
		bfs_err_prefix("%s", bfs_shard_path(ds->shards[sh]));
	return rc;
}

struct rec_ref {
	uint64_t local; /* record within its shard */
	size_t k; /* index into the caller's arrays */
	size_t shard;
};

static int ref_cmp_local(const void *a, const void *b)
{
	uint64_t x = ((const struct rec_ref *)a)->local, y = ((const struct rec_ref *)b)->local;
	return x < y ? -1 : x > y;
}

/* Stable sort of refs by shard: two 8-bit radix passes when shard numbers
 * fit 16 bits (a batch of random records costs two linear passes, not a
 * comparison sort), else qsort on (shard, k). */
static int ref_cmp_shard(const void *a, const void *b)
{
	const struct rec_ref *x = a, *y = b;
	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

static void sort_by_shard(struct rec_ref *refs, struct rec_ref *tmp, size_t n, size_t nshards)
{
	if (nshards > 1 && nshards <= 65536) {
		struct rec_ref *from = refs, *to = tmp;
		for (unsigned shift = 0; shift < 16; shift += 8) {
			size_t count[257] = { 0 };
			if (shift && nshards <= 256)
				break;
			for (size_t i = 0; i < n; i++)
				count[((from[i].shard >> shift) & 255) + 1]++;
			for (size_t d = 1; d <= 256; d++)
				count[d] += count[d - 1];
			for (size_t i = 0; i < n; i++)
				to[count[(from[i].shard >> shift) & 255]++] = from[i];
			struct rec_ref *t = from;
			from = to;
			to = t;
		}
		if (from != refs)
			memcpy(refs, from, n * sizeof(*refs));
	} else if (nshards > 1) {
		qsort(refs, n, sizeof(*refs), ref_cmp_shard);
	}
}

int bfs_dataset_read_many(const struct bfs_dataset *ds, const uint64_t *recs, size_t n,
			  uint8_t *const *dst, bool verify, int *errs, char **msgs)
{
	struct rec_ref *refs = malloc((n ? n : 1) * 2 * sizeof(*refs));
	uint64_t *local = malloc((n ? n : 1) * sizeof(*local));
	uint8_t **d = malloc((n ? n : 1) * sizeof(*d));
	int *e = malloc((n ? n : 1) * sizeof(*e));
	char **m = malloc((n ? n : 1) * sizeof(*m));
	size_t nrefs = 0;
	int rc = 0;

	if (!refs || !local || !d || !e || !m) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		size_t sh;
		uint64_t loc;

		errs[k] = 0;
		msgs[k] = NULL;
		if (bfs_dataset_locate(ds, recs[k], &sh, &loc, NULL) != 0) {
			errs[k] = bfs_err_set(-ENOENT, "record %llu out of range",
					      (unsigned long long)recs[k]);
			msgs[k] = strdup(bfs_err_msg());
			continue;
		}
		refs[nrefs++] = (struct rec_ref){ loc, k, sh };
	}
	/* one run per shard; a compressed shard's run in file order, so that
	 * it is inflated once per run of nearby records (a mapped or pread
	 * shard takes any order) */
	sort_by_shard(refs, refs + n, nrefs, ds->nshards);
	for (size_t i = 0, j; i < nrefs; i = j) {
		struct bfs_shard *s = ds->shards[refs[i].shard];

		for (j = i; j < nrefs && refs[j].shard == refs[i].shard; j++)
			;
		if (bfs_shard_compression(s) != BFS_COMP_NONE)
			qsort(refs + i, j - i, sizeof(*refs), ref_cmp_local);
		for (size_t t = i; t < j; t++) {
			local[t - i] = refs[t].local;
			d[t - i] = dst[refs[t].k];
		}
		bfs_shard_read_many(s, local, j - i, d, verify, e, m);
		for (size_t t = i; t < j; t++) {
			errs[refs[t].k] = e[t - i];
			msgs[refs[t].k] = m[t - i];
		}
	}
out:
	free(refs);
	free(local);
	free(d);
	free(e);
	free(m);
	return rc;
}
