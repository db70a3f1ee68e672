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

int bfs_dataset_open(struct bfs_dataset **out, const char *source, const struct bfs_dataset_opts *o)
{
	struct bfs_dataset *ds = calloc(1, sizeof(*ds));
	char **paths = NULL;
	size_t npaths = 0;
	bool *need = NULL, *cached = NULL, *scanned = NULL;
	char sfile[PATH_MAX + 64];
	bool any_scan = false, lazy;
	int rc;

	if (!ds)
		return -ENOMEM;
	if (bfs_s3_url_is(source)) {
		rc = bfs_objsrc_new(&ds->objs, source, o->s3, o->s3_conns);
		if (!rc)
			rc = bfs_objsrc_list(ds->objs, bfs_source_not_shard, &paths, &npaths,
					     &ds->passed, &ds->npassed);
	} else {
		rc = bfs_source_resolve(&paths, &npaths, source, o->follow_symlinks);
	}
	if (rc)
		goto fail;
	/* an array of pointers: sizeof(struct bfs_shard *) is meant */
	ds->shards = calloc(npaths, sizeof(*ds->shards)); /* NOLINT(bugprone-sizeof-expression) */
	ds->first = calloc(npaths + 1, sizeof(*ds->first));
	ds->cut = calloc(npaths ? npaths : 1, sizeof(*ds->cut));
	need = calloc(npaths, sizeof(*need));
	cached = calloc(npaths, sizeof(*cached));
	scanned = calloc(npaths, sizeof(*scanned));
	ds->abs = o->index_dir ? calloc(npaths, sizeof(*ds->abs)) : NULL;
	ds->pack_of = o->index_dir ? calloc(npaths, sizeof(*ds->pack_of)) : NULL;
	if (!ds->shards || !ds->first || !ds->cut || !need || !cached || !scanned ||
	    (o->index_dir && (!ds->abs || !ds->pack_of))) {
		rc = -ENOMEM;
		goto fail;
	}
	/* with an index cache, a shard's compression comes from its entry when
	 * there is one: detected below only for the shards to scan */
	lazy = o->index_dir && o->comp == BFS_COMP_AUTO;
	for (size_t i = 0; i < npaths; i++) {
		if (ds->objs) {
			/* an object opens undetected; without an index cache
			 * its compression is found (or set) now, as a file's */
			rc = bfs_objsrc_open_shard(ds->objs, i, &ds->shards[i]);
			if (!rc) {
				ds->nshards++;
				rc = lazy ? 0 : bfs_shard_detect(ds->shards[i], o->comp);
				if (!rc)
					continue;
				ds->nshards--;
				bfs_shard_close(ds->shards[i]);
				ds->shards[i] = NULL;
			}
		} else {
			rc = lazy ? bfs_shard_open_undetected(&ds->shards[i], paths[i])
				  : bfs_shard_open(&ds->shards[i], paths[i], o->comp);
		}
		if (rc) {
			if (!strstr(bfs_err_msg(), paths[i]))
				bfs_err_prefix("%s", paths[i]);
			goto fail;
		}
		ds->nshards++;
	}
	ds->index_reused = o->index_dir != NULL;
	if (o->index_dir)
		bfs_dataset_load_indexes(ds, o, need);
	else
		for (size_t i = 0; i < ds->nshards; i++)
			need[i] = true;
	for (size_t i = 0; i < ds->nshards; i++) {
		cached[i] = !need[i];
		if (need[i]) {
			ds->index_reused = false;
			any_scan = true;
		}
		if (need[i] && lazy) {
			rc = bfs_shard_detect(ds->shards[i], BFS_COMP_AUTO);
			if (rc) {
				if (!strstr(bfs_err_msg(), paths[i]))
					bfs_err_prefix("%s", paths[i]);
				goto fail;
			}
		}
	}
	rc = shadows_open(ds, o, need, &any_scan);
	if (rc)
		goto fail;
	if (o->infer) {
		if (o->index_dir) {
			bfs_dataset_schema_file(sfile, sizeof(sfile), o->index_dir, ds);
			if (bfs_dataset_schema_load(&ds->schema, sfile) == 0) {
				ds->schema_reused = true;
				ds->mixed = bfs_dataset_mixed_load(sfile);
			}
		}
		if (!ds->schema) {
			/* inference must see every record: scan all shards */
			for (size_t i = 0; i < ds->nshards; i++)
				need[i] = true;
			any_scan = true;
		}
	}
	if (any_scan) {
		ds->ix_dir_ok = o->index_dir && bfs_cache_dir_make(o->index_dir) == 0;
		rc = bfs_dataset_scan(ds, o, need, cached, scanned, o->infer && !ds->schema);
		/* the good indexes (also after a failed scan, as the files of
		 * their own are): scanned, or loaded and not scanned again */
		for (size_t i = 0; i < ds->nshards; i++)
			scanned[i] = scanned[i] || (cached[i] && !need[i]);
		bfs_dataset_save_packs(ds, o->index_dir, scanned, cached);
		if (rc)
			goto fail;
		if (o->infer && o->index_dir && !ds->schema_reused) {
			bfs_dataset_schema_save(o->index_dir, sfile, ds->schema);
			bfs_dataset_mixed_save(sfile, ds->mixed);
		}
	}
	for (size_t i = 0; ds->shadows && i < ds->nshards; i++)
		(void)bfs_shadow_attach(ds->shadows, ds->shards[i]);
	/* from each index's header: no walk over the records */
	for (size_t i = 0; i < ds->nshards; i++) {
		ds->first[i + 1] = ds->first[i] + bfs_shard_nrecords(ds->shards[i]);
		if (bfs_shard_max_len(ds->shards[i]) > ds->max_len)
			ds->max_len = bfs_shard_max_len(ds->shards[i]);
	}
	ds->nrecords = ds->first[ds->nshards];
	bfs_dataset_free_packs(ds); /* their entries were copied */
	bfs_source_free(paths, npaths);
	free(need);
	free(cached);
	free(scanned);
	*out = ds;
	return 0;
fail:
	bfs_source_free(paths, npaths);
	free(need);
	free(cached);
	free(scanned);
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

uint64_t bfs_dataset_undecodable(const struct bfs_dataset *ds)
{
	return ds->undecodable;
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

uint64_t bfs_dataset_index_anon_bytes(const struct bfs_dataset *ds)
{
	uint64_t b = (ds->nshards + 1) * sizeof(uint64_t);

	for (size_t i = 0; i < ds->nshards; i++) {
		const struct bfs_index *ix = bfs_shard_get_index(ds->shards[i]);
		b += ix ? bfs_index_anon_bytes(ix) : 0;
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
