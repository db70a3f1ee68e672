/* SPDX-License-Identifier: Apache-2.0 */
/*
 * iostage.c — a mount's I/O stage: start, stop, counters (see iostage.h).
 */
#include "iostage.h"

#include "common.h"
#include "diskcache.h"
#include "ioplan.h"
#include "stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* Near ranges share a read when the gap between them is at most this (and
 * at most half of what they carry: fetch.c); no read of a file is longer
 * than a FUSE request (1 MiB) and a half. A bucket charges its latency per
 * GET, not per byte: a GET may carry a whole block of shuffle=block (4 MiB)
 * and more, as a parallel downloader's do. */
#define MERGE_GAP ((uint64_t)64 << 10)
#define MAX_READ ((uint64_t)1 << 20)
#define MAX_GET ((uint64_t)8 << 20)
/* A file source's reads in flight carry this many bytes at most: a FUSE or
 * network filesystem serves its bandwidth to all of them at once, so that
 * 256 reads of 1 MiB in flight (a group of shuffle=block) each end only
 * after about all of them; 32 MiB keeps a source of 1 GB/s busy at 30 ms
 * per read, and the rest waits in the stage's queue, by priority. A
 * bucket's GETs are bound by depth alone (each a connection of its own). */
#define MAX_INFLIGHT_BYTES ((uint64_t)32 << 20)

struct bfs_iostage {
	const struct bfs_dataset *ds;
	struct bfs_fetch *fetch;
	struct bfs_ioplan *plan;
	struct bfs_diskcache *dcache; /* NULL: none */
	uint64_t readahead;
};

/* disk_cache=DIR: opened, or left out with a note. */
static void open_disk_cache(struct bfs_iostage *st, const struct bfs_iostage_opts *o,
			    struct bfs_dataset_io *io)
{
	struct bfs_diskcache_opts dco = {
		.dir = o->disk_cache,
		.size = o->disk_cache_size,
		.note = o->note,
		.ctx = o->ctx,
	};
	char line[600];

	if (bfs_diskcache_open(&st->dcache, &dco) != 0) {
		st->dcache = NULL;
		snprintf(line, sizeof(line), "%s; mounted without it", bfs_err_msg());
		if (o->note)
			o->note(o->ctx, line);
		return;
	}
	io->dc = st->dcache;
}

int bfs_iostage_new(struct bfs_iostage **out, const struct bfs_dataset *ds,
		    const struct bfs_batcher *const *b, size_t nranks,
		    const struct bfs_iostage_opts *o)
{
	struct bfs_dataset_io io = {
		.fetch = {
			.depth = o->depth,
			.budget = o->readahead,
			.merge_gap = MERGE_GAP,
			.max_read = bfs_dataset_objsrc(ds) ? MAX_GET : MAX_READ,
			.max_inflight_bytes = bfs_dataset_objsrc(ds) ? 0 : MAX_INFLIGHT_BYTES,
			/* the reads of a pass are read whole, then dropped but for
			 * the records kept: a quarter of readahead (the rest holds
			 * two windows of records, ioplan.c) */
			.max_pass_inflight = o->readahead / 4,
			.backend = o->backend,
		},
		.all = o->all,
		.note = o->note,
		.ctx = o->ctx,
	};
	struct bfs_iostage *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return bfs_err_set(-ENOMEM, "out of memory");
	st->ds = ds;
	st->readahead = o->readahead;
	if (o->disk_cache)
		open_disk_cache(st, o, &io);
	rc = bfs_dataset_fetch_new(&st->fetch, ds, &io);
	if (!rc)
		rc = bfs_ioplan_new(&st->plan, st->fetch, ds, b, nranks, o->lookahead, o->epochs);
	if (!rc)
		bfs_ioplan_set_mode(st->plan, o->plan);
	if (rc) {
		bfs_dataset_fetch_free(ds, st->fetch);
		bfs_diskcache_close(st->dcache);
		free(st);
		return rc;
	}
	*out = st;
	return 0;
}

void bfs_iostage_stop(struct bfs_iostage *st)
{
	if (st)
		bfs_fetch_stop(st->fetch);
}

void bfs_iostage_free(struct bfs_iostage *st)
{
	if (!st)
		return;
	bfs_ioplan_free(st->plan);
	bfs_dataset_fetch_free(st->ds, st->fetch);
	bfs_diskcache_close(st->dcache);
	free(st);
}

struct bfs_ioplan *bfs_iostage_plan(const struct bfs_iostage *st)
{
	return st->plan;
}

void bfs_iostage_stats(struct bfs_iostage *st, struct bfs_stats_snap *s)
{
	struct bfs_fetch_stats f;
	struct bfs_ioplan_stats p;

	bfs_fetch_stats(st->fetch, &f);
	bfs_ioplan_stats(st->plan, &p);
	bfs_stats_put_io(s, &f, &p, bfs_fetch_depth(st->fetch), st->readahead);
	if (st->dcache) {
		struct bfs_diskcache_stats d;

		uint64_t r, b;

		bfs_diskcache_stats(st->dcache, &d);
		/* a hit is a read served from DIR, through the stage or from a
		 * whole copy read as a local file */
		bfs_dataset_copy_served(st->ds, &r, &b);
		d.hits += r;
		d.hit_bytes += b;
		bfs_stats_put_diskcache(s, &d);
	}
}
