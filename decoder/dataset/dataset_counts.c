/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dataset_counts.c — the ragged counts a scan keeps (dataset.h,
 * bfs_dataset_scan_counts): while a shard that the count pass could only
 * read again from its bucket is scanned (and its records decoded for
 * inference), each bytes feature's values and bytes in every record are
 * noted, so that the count pass (batch_count.c) takes them instead of
 * reading the objects a second time. Only bytes features can be ragged in
 * an inferred schema; after inference only the ragged ones are kept. A
 * shard with a record not decoded (a bad CRC, bytes that do not decode)
 * keeps none: the count pass handles those records its own way.
 *
 * Thread-safety: one collection per shard, filled by that shard's scan
 * alone; the budget is shared, taken atomically.
 */
#include "dataset_impl.h"

#include <stdlib.h>
#include <string.h>

struct scan_col {
	char *name;
	uint32_t *nv, *nb; /* [cap] each record's values and bytes */
};

struct bfs_scan_counts {
	uint64_t nrec, cap;
	size_t ncols;
	struct scan_col *cols;
	int64_t *budget; /* bytes the scan may still take, shared */
	bool spoiled;
};

static void cols_free(struct bfs_scan_counts *c)
{
	for (size_t i = 0; i < c->ncols; i++) {
		free(c->cols[i].name);
		free(c->cols[i].nv);
		free(c->cols[i].nb);
	}
	free(c->cols);
	c->cols = NULL;
	c->ncols = 0;
}

static void scan_counts_free(struct bfs_scan_counts *c)
{
	if (!c)
		return;
	cols_free(c);
	free(c);
}

struct bfs_scan_counts *bfs_scan_counts_new(int64_t *budget)
{
	struct bfs_scan_counts *c = calloc(1, sizeof(*c));

	if (c)
		c->budget = budget;
	return c;
}

void bfs_scan_counts_spoil(struct bfs_scan_counts *c)
{
	if (!c || c->spoiled)
		return;
	__atomic_add_fetch(c->budget, (int64_t)(c->cap * c->ncols * 2 * sizeof(uint32_t)),
			   __ATOMIC_RELAXED);
	cols_free(c);
	c->spoiled = true;
}

/* Take bytes from the budget: false (nothing taken) when it has not got them. */
static bool charge(struct bfs_scan_counts *c, uint64_t bytes)
{
	if (__atomic_sub_fetch(c->budget, (int64_t)bytes, __ATOMIC_RELAXED) >= 0)
		return true;
	__atomic_add_fetch(c->budget, (int64_t)bytes, __ATOMIC_RELAXED);
	return false;
}

/* Room for record `index` in every column (new room zeroed). */
static bool grow(struct bfs_scan_counts *c, uint64_t index)
{
	uint64_t cap = c->cap ? c->cap : 256;

	if (index < c->cap)
		return true;
	while (cap <= index)
		cap *= 2;
	if (!charge(c, (cap - c->cap) * c->ncols * 2 * sizeof(uint32_t)))
		return false;
	for (size_t i = 0; i < c->ncols; i++) {
		uint32_t *nv = realloc(c->cols[i].nv, cap * sizeof(*nv));
		uint32_t *nb = nv ? realloc(c->cols[i].nb, cap * sizeof(*nb)) : NULL;

		if (nv)
			c->cols[i].nv = nv;
		if (!nb)
			return false;
		c->cols[i].nb = nb;
		memset(nv + c->cap, 0, (cap - c->cap) * sizeof(*nv));
		memset(nb + c->cap, 0, (cap - c->cap) * sizeof(*nb));
	}
	c->cap = cap;
	return true;
}

/* The column of feature `name`, made (zeros for the records before) when
 * new; NULL without room. */
static struct scan_col *col_of(struct bfs_scan_counts *c, const char *name)
{
	struct scan_col *cols, *col;

	for (size_t i = 0; i < c->ncols; i++)
		if (strcmp(c->cols[i].name, name) == 0)
			return &c->cols[i];
	if (!charge(c, c->cap * 2 * sizeof(uint32_t)))
		return NULL;
	cols = realloc(c->cols, (c->ncols + 1) * sizeof(*cols));
	if (!cols)
		return NULL;
	c->cols = cols;
	col = &cols[c->ncols];
	col->name = strdup(name);
	col->nv = calloc(c->cap, sizeof(*col->nv));
	col->nb = calloc(c->cap, sizeof(*col->nb));
	c->ncols++; /* freed with the others even when half made */
	return col->name && col->nv && col->nb ? col : NULL;
}

void bfs_scan_counts_add(struct bfs_scan_counts *c, uint64_t index, const struct bfs_example *ex)
{
	if (!c || c->spoiled)
		return;
	if (index != c->nrec || !grow(c, index)) {
		bfs_scan_counts_spoil(c);
		return;
	}
	for (size_t i = 0; i < ex->nfeatures; i++) {
		const struct bfs_values *v = &ex->features[i].v;
		struct scan_col *col;
		uint64_t nb = 0;

		if (v->kind != BFS_KIND_BYTES)
			continue; /* no value (Feature {}) counts 0, as nothing */
		col = col_of(c, ex->features[i].name);
		if (!col) {
			bfs_scan_counts_spoil(c);
			return;
		}
		for (size_t k = 0; k < v->count; k++)
			nb += v->b[k].len;
		col->nv[index] = v->count > UINT32_MAX ? UINT32_MAX : (uint32_t)v->count;
		col->nb[index] = nb > UINT32_MAX ? UINT32_MAX : (uint32_t)nb;
	}
	c->nrec = index + 1;
}

struct bfs_scan_counts *bfs_scan_counts_end(struct bfs_scan_counts *c, uint64_t n, bool ok)
{
	if (c && (!ok || c->spoiled || c->nrec != n)) {
		bfs_scan_counts_spoil(c);
		scan_counts_free(c);
		return NULL;
	}
	return c;
}

struct bfs_scan_counts *bfs_scan_counts_keep(struct bfs_scan_counts *c, const struct bfs_schema *s)
{
	size_t k = 0;

	if (!c)
		return NULL;
	for (size_t i = 0; i < c->ncols; i++) {
		bool ragged = false;

		for (size_t f = 0; s && f < s->nfeatures; f++)
			if (strcmp(s->features[f].name, c->cols[i].name) == 0)
				ragged = s->features[f].layout == BFS_LAYOUT_RAGGED2;
		if (ragged) {
			c->cols[k++] = c->cols[i];
			continue;
		}
		__atomic_add_fetch(c->budget, (int64_t)(c->cap * 2 * sizeof(uint32_t)),
				   __ATOMIC_RELAXED);
		free(c->cols[i].name);
		free(c->cols[i].nv);
		free(c->cols[i].nb);
	}
	c->ncols = k;
	if (k == 0) {
		scan_counts_free(c);
		return NULL;
	}
	return c;
}

bool bfs_dataset_scan_counts(const struct bfs_dataset *ds, size_t shard, const char *feature,
			     const uint32_t **nvalues, const uint32_t **nbytes)
{
	const struct bfs_scan_counts *c = ds->scnt && shard < ds->nshards ? ds->scnt[shard] : NULL;

	for (size_t i = 0; c && i < c->ncols; i++)
		if (strcmp(c->cols[i].name, feature) == 0) {
			*nvalues = c->cols[i].nv;
			*nbytes = c->cols[i].nb;
			return true;
		}
	return false;
}

void bfs_dataset_scan_counts_drop(struct bfs_dataset *ds)
{
	for (size_t i = 0; ds->scnt && !ds->borrowed && i < ds->nshards; i++)
		scan_counts_free(ds->scnt[i]);
	free(ds->scnt);
	ds->scnt = NULL;
}
