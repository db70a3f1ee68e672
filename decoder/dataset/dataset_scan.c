/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dataset_scan.c — the scan pass of bfs_dataset_open: every shard without
 * a good cached index is read once, over the jobs threads (bfs_pfor),
 * checking its framing and both CRCs, building its index (saved to
 * index_dir), writing a shadow copy of a compressed shard, and feeding
 * schema inference when no schema is given. A corrupt record is indexed
 * and reported; a shard cut short is kept or fails per opts.keep_cut. A
 * bucket's objects that get no shadow copy keep the ragged counts of their
 * records (dataset_counts.c): the count pass would read them again.
 */
#include "dataset_impl.h"

#include "example.h"
#include "pfor.h"
#include "shadow.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct scan_ctx {
	struct bfs_dataset *ds;
	const struct bfs_dataset_opts *o;
	bool *need_scan; /* [nshards] */
	const bool *cached; /* [nshards] or NULL: index loaded from index_dir (not saved again) */
	bool *scanned; /* [nshards]: scanned without error */
	bool infer;
	bool counts; /* keep the ragged counts of the shards read from a bucket */
	int64_t budget; /* the bytes those counts may take, all shards together */
	struct bfs_infer *inf;
	/* guards inf, done_bytes, the dataset's bad_records,
	 * and the calls of on_bad and progress */
	pthread_mutex_t lock;
	uint64_t done_bytes, total_bytes;
};

struct rec_ctx {
	struct scan_ctx *sc;
	size_t shard;
	struct bfs_scan_counts *counts; /* NULL: none kept */
};

/* The ragged counts kept of a bucket's records at most (8 bytes a record
 * and bytes feature): past it, the count pass reads them again. */
#define SCAN_COUNTS_BUDGET ((int64_t)256 << 20)

static int on_record(void *ctx, uint64_t index, uint64_t offset, const uint8_t *data, uint32_t len)
{
	struct rec_ctx *rc = ctx;
	struct scan_ctx *sc = rc->sc;
	struct bfs_example *ex = NULL;
	int err;

	if (bfs_example_decode(&ex, data, len) != 0) {
		/* corrupt content: skipped by inference, reported on read */
		bfs_scan_counts_spoil(rc->counts);
		return 0;
	}
	bfs_scan_counts_add(rc->counts, index, ex);
	pthread_mutex_lock(&sc->lock);
	err = bfs_infer_add(sc->inf, ex);
	if (err)
		bfs_err_prefix("%s: record %llu at offset %llu",
			       bfs_shard_path(sc->ds->shards[rc->shard]), (unsigned long long)index,
			       (unsigned long long)offset);
	pthread_mutex_unlock(&sc->lock);
	bfs_example_free(ex);
	return err;
}

static void on_bad(void *ctx, uint64_t index, uint64_t offset, const char *msg)
{
	struct rec_ctx *rc = ctx;
	struct scan_ctx *sc = rc->sc;

	(void)index;
	(void)offset;
	bfs_scan_counts_spoil(rc->counts); /* a record not decoded here */
	pthread_mutex_lock(&sc->lock);
	sc->ds->bad_records++;
	if (sc->o->on_bad)
		sc->o->on_bad(sc->o->progress_ctx, bfs_shard_path(sc->ds->shards[rc->shard]), msg);
	pthread_mutex_unlock(&sc->lock);
}

/* Shard i's scan stopped at a record cut short (err, its message set):
 * with opts.keep_cut its whole records before the cut are kept and the
 * message stays in ds->cut[i] (returns 0); else the error is returned,
 * saying what keep_cut would do. A kept shard's index is never cached: an
 * index does not say that its shard was cut, and every open scans that
 * shard again (and reports it again) until the file is whole. */
static int keep_cut(struct scan_ctx *sc, size_t i, int err)
{
	uint64_t n = bfs_shard_nrecords(sc->ds->shards[i]);
	char why[1024];

	snprintf(why, sizeof(why), "%s", bfs_err_msg());
	if (!sc->o->keep_cut)
		return bfs_err_set(err,
				   "%s; the shard is cut short (with on_corrupt=skip its %" PRIu64
				   " whole records before the cut are served)",
				   why, n);
	if (asprintf(&sc->ds->cut[i],
		     "%s; the shard is cut short: its %" PRIu64
		     " whole records before the cut are kept",
		     why, n) < 0) {
		sc->ds->cut[i] = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Scan shard i if it needs it; its error (message set) stops the pass
 * (bfs_pfor): the shards being scanned finish, no other starts. */
static int scan_one(void *arg, size_t i)
{
	struct scan_ctx *sc = arg;
	struct bfs_shadow_writer *w;
	struct rec_ctx rc;
	int err;

	if (!sc->need_scan[i])
		return 0;
	rc.sc = sc;
	rc.shard = i;
	rc.counts = NULL;
	/* CRCs are checked; a corrupt record is indexed and reported, and is
	 * handled per on_corrupt when a batch holding it is read */
	bfs_shard_set_bad_fn(sc->ds->shards[i], on_bad, &rc);
	w = sc->ds->shadows ? bfs_shadow_begin(sc->ds->shadows, sc->ds->shards[i]) : NULL;
	if (sc->counts && !w) /* else the count pass reads the local copy */
		rc.counts = bfs_scan_counts_new(&sc->budget);
	err = bfs_shard_scan(sc->ds->shards[i], true, sc->infer ? on_record : NULL, &rc);
	bfs_shadow_end(w, err);
	bfs_shard_set_bad_fn(sc->ds->shards[i], NULL, NULL);
	if (err && !strstr(bfs_err_msg(), bfs_shard_path(sc->ds->shards[i])))
		bfs_err_prefix("%s", bfs_shard_path(sc->ds->shards[i]));
	if (err && err != -ENOMEM && bfs_shard_cut(sc->ds->shards[i]))
		err = keep_cut(sc, i, err);
	if (sc->counts)
		sc->ds->scnt[i] = bfs_scan_counts_end(
			rc.counts, bfs_shard_nrecords(sc->ds->shards[i]), !err && !sc->ds->cut[i]);
	/* a small index goes into its directory's pack, written once
	 * after the scan (bfs_dataset_save_packs) */
	if (!err && sc->o->index_dir && !(sc->cached && sc->cached[i]) &&
	    !bfs_dataset_idx_packed(sc->ds, i) && !sc->ds->cut[i])
		bfs_dataset_idx_save(sc->ds, sc->o->index_dir, i);
	sc->scanned[i] = !err && !sc->ds->cut[i];
	pthread_mutex_lock(&sc->lock);
	sc->done_bytes += bfs_shard_file_size(sc->ds->shards[i]);
	if (sc->o->progress)
		sc->o->progress(sc->o->progress_ctx, sc->done_bytes, sc->total_bytes);
	pthread_mutex_unlock(&sc->lock);
	return err;
}

int bfs_dataset_scan(struct bfs_dataset *ds, const struct bfs_dataset_opts *o, bool *need,
		     const bool *cached, bool *scanned, bool infer)
{
	struct scan_ctx sc;
	int rc = 0;

	memset(&sc, 0, sizeof(sc));
	sc.ds = ds;
	sc.o = o;
	sc.need_scan = need;
	sc.cached = cached;
	sc.scanned = scanned;
	sc.infer = infer;
	sc.counts = infer && ds->objs &&
		    (ds->scnt = calloc(ds->nshards ? ds->nshards : 1,
				       sizeof(struct bfs_scan_counts *)));
	sc.budget = SCAN_COUNTS_BUDGET;
	for (size_t i = 0; i < ds->nshards; i++)
		if (need[i])
			sc.total_bytes += bfs_shard_file_size(ds->shards[i]);
	if (infer) {
		rc = bfs_infer_new(&sc.inf);
		if (rc)
			return rc;
	}
	pthread_mutex_init(&sc.lock, NULL);
	rc = bfs_pfor(ds->nshards, o->jobs, scan_one, &sc);
	pthread_mutex_destroy(&sc.lock);
	if (!rc && infer)
		rc = bfs_infer_finish(&ds->schema, sc.inf);
	if (!rc && infer)
		ds->mixed = bfs_infer_mixed(sc.inf);
	bfs_infer_free(sc.inf);
	for (size_t i = 0; sc.counts && i < ds->nshards; i++)
		ds->scnt[i] = bfs_scan_counts_keep(ds->scnt[i], rc ? NULL : ds->schema);
	return rc;
}
