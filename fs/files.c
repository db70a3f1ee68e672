/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files.c — the files of a mount, their sizes and their bytes (see
 * files.h).
 */
#include "files.h"

#include "cred.h"
#include "cudapool.h"
#include "epoch.h"
#include "errlog.h"
#include "objsrc.h"
#include "stash.h"
#include "stats.h"
#include "views.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NVIEWS 8 /* epoch views kept (geometry and chunk totals of all/) */
#define READERS 64 /* readers of stats.json and errors.txt remembered */
#define TOUCHES 256 /* per-reader counts of other reads (hashed by thread id) */
#define ACTIVE_MS 50 /* a reader reads on (the size it saw holds) this long */
#define SHARE_MS 1000 /* a snapshot shared with later readers at most this old */

/* A reader of a dynamic file: the snapshot its last size or read was of. */
struct dyn_reader {
	uint64_t tid; /* 0: a free slot */
	unsigned k;
	struct bfs_snapshot *snap; /* a reference */
	uint64_t gen;
	uint64_t at_ns; /* its last size or read (CLOCK_MONOTONIC) */
	uint64_t made_ns; /* when snap was made */
	uint64_t touch; /* touches[] then: the reader's reads of other files */
};

struct bfs_files {
	const struct bfs_dataset *ds;
	const struct bfs_batcher *b; /* rank 0's (the plan, the facts) */
	const struct bfs_batcher *const *rb; /* [nranks]: each rank's */
	size_t nranks; /* 1 without rank folders */
	uint64_t cache_size;
	int cuda_device;
	struct bfs_cache *cache;
	struct bfs_iostage *io; /* borrowed (bfs_files_set_io); NULL: none */
	struct bfs_vfs *vfs;
	char *readme, *schema_json;
	size_t readme_len, schema_len;
	time_t mount_time;
	uid_t uid;
	gid_t gid;
	/* geometry of a full batch and of the last one, when no tensor is
	 * ragged (then every batch but the last has the same sizes) */
	struct bfs_geom *geom_full, *geom_last;
	/* snapshots of stats.json (DYN_STATS) and errors.txt (DYN_ERRORS);
	 * their generation is their mtime, in ns past the mount's */
	struct bfs_snapshot_set *dyn;
	pthread_mutex_t dyn_lock; /* guards readers, next_reader, reported */
	struct dyn_reader readers[READERS];
	unsigned next_reader;
	/* the snapshot each file was last sized at, for unknown readers */
	struct bfs_snapshot *reported[2];
	size_t pad[2]; /* stats.json's next snapshot padded to this (0: none) */
	uint64_t touches[TOUCHES]; /* atomic */
	struct bfs_views *views; /* of all/: geometry and chunk totals */
	struct bfs_stash *stash; /* all/'s small tensors, so columns cost one pass */
	struct bfs_errlog *errlog; /* errors.txt */
	struct bfs_stats_reads reads; /* reads served, for stats.json */
	/* the CUDA path (-o cuda); NULL when off */
	struct bfs_cudapath *cuda;
	struct bfs_cudapool *cpool; /* who holds which buffer, who waits */
	struct bfs_cudaopen *copen; /* the opens of batch-B.cuda */
};

/* ------------------------------------------------------------- errors */

void bfs_files_report(void *arg, const char *msg, unsigned flags)
{
	struct bfs_files *f = arg;

	bfs_errlog_add_as(f->errlog, msg, flags & BFS_REPORT_SKIPPED, flags & BFS_REPORT_SOURCE);
}

/* ------------------------------------------------------------ dynamic */

/* stats.json's text: the JSON, padded with spaces to pad bytes (0: none;
 * only while another reader reads a snapshot of that size). */
static char *stats_text(struct bfs_files *f, size_t pad, size_t *len)
{
	struct bfs_stats_snap snap = { 0 };
	struct bfs_cache_stats st;
	struct bfs_errlog_counts ec;

	bfs_stats_put_dataset(&snap, f->ds, bfs_batcher_epoch_len(f->b),
			      bfs_batcher_nbatches(f->b));
	bfs_cache_stats(f->cache, &st);
	st.budget += f->cache_size / 16; /* the stash's share (bfs_files_new) */
	st.bytes += bfs_stash_bytes(f->stash);
	bfs_stats_put_cache(&snap, &st);
	bfs_errlog_counts(f->errlog, &ec);
	bfs_stats_put_errors(&snap, &ec);
	bfs_stats_put_reads(&snap, &f->reads);
	if (f->io)
		bfs_iostage_stats(f->io, &snap);
	if (bfs_dataset_objsrc(f->ds) && bfs_objsrc_keeper(bfs_dataset_objsrc(f->ds)))
		bfs_stats_put_cred(&snap, bfs_objsrc_keeper(bfs_dataset_objsrc(f->ds)));
	if (f->cuda) {
		struct bfs_cudapath_stats cs;
		struct bfs_cudapool_stats ps;

		bfs_cudapath_stats(f->cuda, &cs);
		bfs_cudapool_stats(f->cpool, &ps);
		bfs_stats_put_cuda(&snap, bfs_cudapath_device(f->cuda), &ps, &cs);
	}
	snap.v[BFS_STAT_UPTIME_SECONDS].i = (int64_t)(time(NULL) - f->mount_time);
	return bfs_stats_json(&snap, pad, len);
}

static char *errors_text(struct bfs_files *f, size_t *len)
{
	struct bfs_cred_keeper *k =
		bfs_dataset_objsrc(f->ds) ? bfs_objsrc_keeper(bfs_dataset_objsrc(f->ds)) : NULL;
	char line[700], msg[800], when[32];

	/* a bucket's credentials that cannot be refreshed: a line a minute at
	 * most (the keeper says when one is due), stamped with its minute */
	if (k && bfs_cred_keeper_errline(k, line, sizeof(line))) {
		time_t now = time(NULL);
		struct tm tm;

		gmtime_r(&now, &tm);
		strftime(when, sizeof(when), "%H:%M UTC", &tm);
		snprintf(msg, sizeof(msg), "%s (%s)", line, when);
		bfs_errlog_add(f->errlog, msg, false);
	}
	return bfs_errlog_text(f->errlog, len);
}

enum { DYN_STATS, DYN_ERRORS };

static unsigned dyn_file(const struct bfs_vnode *n)
{
	return n->type == BFS_V_STATS ? DYN_STATS : DYN_ERRORS;
}

/* (under dyn_lock: f->pad) */
static char *dyn_text(void *arg, unsigned k, size_t *len)
{
	struct bfs_files *f = arg;

	return k == DYN_STATS ? stats_text(f, f->pad[k], len) : errors_text(f, len);
}

int bfs_files_open_snapshot(struct bfs_files *f, const struct bfs_vnode *n,
			    struct bfs_snapshot **out)
{
	size_t len = 0;
	char *text = n->type == BFS_V_STATS ? stats_text(f, 0, &len) : errors_text(f, &len);

	*out = text ? bfs_snapshot_new(text, len) : NULL;
	return *out ? 0 : -ENOMEM;
}

void bfs_files_release(struct bfs_files *f, const struct bfs_vnode *n, uint64_t fh)
{
	if (n->type == BFS_V_CUDA)
		bfs_cudaopen_put(f->copen, (struct bfs_cudaopen_fh *)(uintptr_t)fh);
	else
		bfs_snapshot_put((struct bfs_snapshot *)(uintptr_t)fh);
}

/* Which snapshot a reader of a dynamic file sees (files.h,
 * bfs_files_asker): without OPEN requests the kernel sizes the file by the
 * last GETATTR and reads it through its page cache, so a reader reading to
 * the end must find the end of the snapshot it read. */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t touches(struct bfs_files *f, uint64_t tid)
{
	return __atomic_load_n(&f->touches[tid % TOUCHES], __ATOMIC_RELAXED);
}

/* A read of another file by reader tid: its next size of a dynamic file is
 * a fresh snapshot's. */
static void touch(struct bfs_files *f, uint64_t tid)
{
	if (tid)
		__atomic_add_fetch(&f->touches[tid % TOUCHES], 1, __ATOMIC_RELAXED);
}

/* Reader tid's slot for file k (under dyn_lock); NULL when none and !make
 * (else the least recently used slot, taken over). */
static struct dyn_reader *dyn_reader(struct bfs_files *f, uint64_t tid, unsigned k, bool make)
{
	struct dyn_reader *r;

	for (unsigned i = 0; i < READERS; i++)
		if (f->readers[i].tid == tid && f->readers[i].k == k)
			return &f->readers[i];
	if (!make)
		return NULL;
	r = &f->readers[f->next_reader++ % READERS];
	bfs_snapshot_put(r->snap);
	memset(r, 0, sizeof(*r));
	r->tid = tid;
	r->k = k;
	return r;
}

static void set_reported(struct bfs_files *f, unsigned k, struct bfs_snapshot *s)
{
	bfs_snapshot_get(s);
	bfs_snapshot_put(f->reported[k]);
	f->reported[k] = s;
}

/* A fresh snapshot of file k for reader tid (a reference; under dyn_lock).
 * While another reader reads one (its last size or read within
 * ACTIVE_MS), the kernel's one size of the file is that snapshot's: the
 * fresh text is padded with spaces to it, or, longer, that snapshot is
 * shared, so that neither reader finds the other's end. */
static struct bfs_snapshot *fresh(struct bfs_files *f, unsigned k, uint64_t tid, uint64_t now,
				  uint64_t *gen, uint64_t *made)
{
	struct dyn_reader *act = NULL;
	struct bfs_snapshot *s;

	for (unsigned i = 0; i < READERS; i++) {
		struct dyn_reader *r = &f->readers[i];

		if (r->tid && r->tid != tid && r->k == k && r->snap &&
		    now - r->at_ns < (uint64_t)ACTIVE_MS * 1000000u &&
		    (!act || r->at_ns > act->at_ns))
			act = r;
	}
	*made = now;
	if (!act)
		return bfs_snapshot_refresh(f->dyn, k, gen);
	f->pad[k] = act->snap->len;
	s = bfs_snapshot_refresh(f->dyn, k, gen);
	f->pad[k] = 0;
	/* longer: theirs, unless it is old (then this reader's, at its size) */
	if (s && s->len != act->snap->len && now - act->made_ns < (uint64_t)SHARE_MS * 1000000u) {
		bfs_snapshot_put(s);
		s = act->snap;
		bfs_snapshot_get(s);
		*gen = act->gen;
		*made = act->made_ns;
	}
	return s;
}

static int dyn_size(struct bfs_files *f, unsigned k, const struct bfs_files_asker *who,
		    uint64_t *size, uint64_t *mtime_ns)
{
	uint64_t tid = who ? who->reader : 0, now, gen = 0;
	struct bfs_snapshot *s = NULL;
	struct dyn_reader *r;

	pthread_mutex_lock(&f->dyn_lock);
	now = now_ns(); /* under the lock: no slot's time is later */
	r = tid ? dyn_reader(f, tid, k, false) : NULL;
	if (r && r->snap && who->reading &&
	    now - r->at_ns < (uint64_t)BFS_FILES_CONTINUE_MS * 1000000u &&
	    r->touch == touches(f, tid)) {
		/* the same reader reading on: the snapshot it reads */
		s = r->snap;
		bfs_snapshot_get(s);
		gen = r->gen;
	} else {
		uint64_t made = now;

		s = fresh(f, k, tid, now, &gen, &made);
		if (s && tid) {
			r = dyn_reader(f, tid, k, true);
			bfs_snapshot_get(s);
			bfs_snapshot_put(r->snap); /* its older one */
			r->snap = s;
			r->gen = gen;
			r->made_ns = made;
			r->touch = touches(f, tid);
		}
	}
	if (s) {
		if (r)
			r->at_ns = now;
		set_reported(f, k, s);
	}
	pthread_mutex_unlock(&f->dyn_lock);
	if (!s)
		return -ENOMEM;
	*size = s->len;
	if (mtime_ns)
		*mtime_ns = gen;
	bfs_snapshot_put(s);
	return 0;
}

/* The snapshot reader tid reads of file k (a reference): the one its size
 * was last of, or, for a reader not seen, the one last sized. */
static struct bfs_snapshot *dyn_read(struct bfs_files *f, unsigned k, uint64_t tid)
{
	struct bfs_snapshot *s;
	struct dyn_reader *r;

	pthread_mutex_lock(&f->dyn_lock);
	r = tid ? dyn_reader(f, tid, k, false) : NULL;
	s = r && r->snap ? r->snap : f->reported[k];
	if (s)
		bfs_snapshot_get(s);
	else /* never sized: the kernel has no size of it */
		s = bfs_snapshot_current(f->dyn, k);
	if (r)
		r->at_ns = now_ns();
	pthread_mutex_unlock(&f->dyn_lock);
	return s;
}

/* -------------------------------------------------------------- sizes */

/* Geometry of (epoch, batch): borrowed from the fixed ones, or computed
 * (*owned set: free it). */
static int get_geom(struct bfs_files *f, uint64_t r, uint64_t e, uint64_t b, struct bfs_geom **g,
		    bool *owned)
{
	bool last = b + 1 == bfs_batcher_nbatches(f->b);

	*owned = false;
	/* (ranks differ only in their last batch, which may be short) */
	if (f->geom_full && (!last || f->nranks == 1)) {
		*g = last ? f->geom_last : f->geom_full;
		return 0;
	}
	*owned = true;
	return bfs_batcher_geom(g, f->rb[r], e, b);
}

int bfs_files_size(struct bfs_files *f, const struct bfs_vnode *n,
		   const struct bfs_files_asker *who, uint64_t *size, uint64_t *mtime_ns)
{
	struct bfs_geom *g;
	bool owned;
	int rc;

	switch (n->type) {
	case BFS_V_README:
		*size = f->readme_len;
		return 0;
	case BFS_V_SCHEMA:
		*size = f->schema_len;
		return 0;
	case BFS_V_STATS:
	case BFS_V_ERRORS:
		return dyn_size(f, dyn_file(n), who, size, mtime_ns);
	case BFS_V_SAFETENSORS:
	case BFS_V_NPY:
		if (n->all) {
			struct bfs_view_ref *r;
			rc = bfs_views_get(&r, f->views, n->rank, n->epoch);
			if (rc)
				return rc;
			g = r->v->geom;
			*size = n->type == BFS_V_SAFETENSORS ? g->st_size
							     : bfs_npy_size(&g->g[n->tensor]);
			bfs_views_put(f->views, r);
			return 0;
		}
		rc = get_geom(f, n->rank, n->epoch, n->batch, &g, &owned);
		if (rc)
			return rc;
		*size = n->type == BFS_V_SAFETENSORS ? g->st_size : bfs_npy_size(&g->g[n->tensor]);
		if (owned)
			bfs_geom_free(g);
		return 0;
	case BFS_V_CUDA: {
		size_t len = 0;
		char *d;
		rc = get_geom(f, n->rank, n->epoch, n->batch, &g, &owned);
		if (rc)
			return rc;
		d = bfs_cudapath_describe(bfs_batcher_plan(f->b), g, f->cuda_device, NULL, &len);
		if (owned)
			bfs_geom_free(g);
		free(d);
		if (!d)
			return -ENOMEM;
		*size = len;
		return 0;
	}
	default:
		*size = 0;
		return 0;
	}
}

int bfs_files_stat(struct bfs_files *f, const struct bfs_vnode *n,
		   const struct bfs_files_asker *who, struct stat *st)
{
	uint64_t size = 0, gen = 0;
	int rc;

	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_uid = f->uid;
	st->st_gid = f->gid;
	st->st_atime = st->st_mtime = st->st_ctime = f->mount_time;
	st->st_blksize = BFS_FILES_BLKSIZE;
	if (bfs_vnode_is_dir(n)) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return 0;
	}
	rc = bfs_files_size(f, n, who, &size, &gen);
	if (rc)
		return rc;
	if (gen) { /* a dynamic file: a new mtime per snapshot */
		st->st_mtim.tv_sec = f->mount_time + (time_t)(gen / 1000000000u);
		st->st_mtim.tv_nsec = (long)(gen % 1000000000u);
	}
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_size = (off_t)size;
	st->st_blocks = (blkcnt_t)((size + 511) / 512);
	return 0;
}

/* ------------------------------------------------------------------ read */

/* Bytes [off, off + len) of data[0, dlen), as the one piece. */
static void read_slice(struct bfs_files_read *r, const void *data, size_t dlen, uint64_t off,
		       size_t len)
{
	if (off >= dlen)
		return;
	if (len > dlen - (size_t)off)
		len = dlen - (size_t)off;
	r->p[0].mem = (const char *)data + off;
	r->p[0].size = len;
	r->count = 1;
}

void bfs_files_read_done(struct bfs_files *f, struct bfs_files_read *r)
{
	if (r->entry)
		bfs_cache_put(f->cache, r->entry);
	bfs_snapshot_put(r->snap);
	bfs_cudaopen_put(f->copen, r->cuda);
	free(r->owned);
}

/* A read of a batch or view file failed (rc < 0): EIO, or ENOMEM (counted
 * by bfs_files_read). */
static int read_failed(struct bfs_files *f, int rc)
{
	(void)f;
	return rc == -ENOMEM ? -ENOMEM : -EIO;
}

/* batch-B.safetensors, or a .npy of batch-B/: straight from the cache
 * entry's buffer (held until the reply is written), a .npy's header built
 * here; no copy. */
static int read_batch_file(struct bfs_files *f, const struct bfs_vnode *n, size_t len, uint64_t pos,
			   struct bfs_files_read *r)
{
	const struct bfs_tensor_geom *g;
	uint64_t fsize, hlen, rows_hlen;
	struct bfs_cache_entry *e = NULL;
	const uint8_t *data;
	double rows;
	size_t left;
	int rc;

	rc = bfs_cache_get(&e, f->cache, n->rank, n->epoch, n->batch);
	if (rc)
		return read_failed(f, rc);
	r->entry = e;
	if (n->type == BFS_V_SAFETENSORS) {
		fsize = e->geom->st_size;
		hlen = 0;
		data = e->buf;
		g = NULL;
		rows_hlen = e->geom->st_hlen;
	} else {
		g = &e->geom->g[n->tensor];
		fsize = bfs_npy_size(g);
		hlen = g->npy_hlen;
		data = e->buf + g->offset;
		rows_hlen = hlen;
	}
	if (pos >= fsize)
		return 0;
	if (len > fsize - pos)
		len = (size_t)(fsize - pos);
	rows = bfs_stats_rows(e->geom, rows_hlen, pos, pos + len);
	r->zero_copy = true;
	left = len;
	if (pos < hlen) {
		size_t k = (size_t)(hlen - pos) < left ? (size_t)(hlen - pos) : left;
		bfs_npy_header(r->hdr, sizeof(r->hdr), bfs_batcher_plan(f->b)->t[n->tensor].dtype,
			       g->ndim, g->shape);
		r->p[r->count].mem = r->hdr + pos;
		r->p[r->count++].size = k;
		left -= k;
		pos = hlen;
	}
	if (left) {
		r->p[r->count].mem = data + (pos - hlen);
		r->p[r->count++].size = left;
	}
	/* counted before the reply: a reader that reads stats.json after its
	 * read returned sees the read in it */
	bfs_stats_read(&f->reads, len, rows);
	return 0;
}

/* Bytes [a, b) of fixed-size-row tensor t's data in the epoch view
 * (rowb bytes a row), from the batches that hold those rows: row i*B + j
 * is row j of batch i. For a chunk that failed (a corrupt record under
 * on_corrupt=fail): only the batch holding the record fails. */
static int view_rows_from_batches(struct bfs_files *f, uint64_t rank, uint64_t epoch, size_t t,
				  uint64_t rowb, uint64_t a, uint64_t b, uint8_t *dst)
{
	const struct bfs_batcher *bt = f->rb[rank];
	uint64_t B = bfs_batcher_batch_len(bt, 0);

	while (a < b && B) {
		uint64_t r = a / rowb, i = r / B, j = r % B, n, k;
		struct bfs_cache_entry *e = NULL;
		const struct bfs_tensor_geom *g;
		int rc = bfs_cache_get(&e, f->cache, rank, epoch, i);

		if (rc)
			return rc;
		g = &e->geom->g[t];
		n = bfs_batcher_batch_len(bt, i);
		if (g->nbytes != n * rowb || j >= n) { /* not rows of rowb bytes */
			bfs_cache_put(f->cache, e);
			return -EIO;
		}
		k = (n - j) * rowb - a % rowb;
		if (k > b - a)
			k = b - a;
		memcpy(dst, e->buf + g->offset + j * rowb + a % rowb, k);
		bfs_cache_put(f->cache, e);
		a += k;
		dst += k;
	}
	return a < b ? -EIO : 0;
}

/* Bytes [a, b) of tensor t's data in the epoch view, from the chunks that
 * hold them (decoded on demand, prefetched ahead), or from the stash of
 * small tensors (stash.h), which every chunk in hand fills. */
static int view_tensor_bytes(struct bfs_files *f, const struct bfs_epoch_view *v, uint64_t rank,
			     uint64_t epoch, size_t t, uint64_t a, uint64_t b, uint8_t *dst)
{
	uint64_t rowb = bfs_epoch_view_row_bytes(v, t);

	if (v->nchunks == 0) { /* no rows: only offsets, all 0 */
		memset(dst, 0, b - a);
		return 0;
	}
	while (a < b) {
		uint64_t c = bfs_epoch_view_chunk(v, t, a), k;
		struct bfs_cache_entry *e = NULL;
		int rc;

		k = bfs_stash_read(f->stash, v, rank, epoch, t, c, a, b - a, dst);
		if (k) {
			a += k;
			dst += k;
			continue;
		}
		rc = bfs_cache_get(&e, f->cache, rank, epoch, c | BFS_CHUNK);
		if (rc == -EIO && rowb) {
			/* a corrupt record failed the chunk: its other rows come
			 * from their batches, so only its batch's rows fail */
			uint64_t end = (c + 1) * v->chunk_rows * rowb;

			k = end < b ? end - a : b - a;
			rc = view_rows_from_batches(f, rank, epoch, t, rowb, a, a + k, dst);
			if (rc)
				return rc;
			a += k;
			dst += k;
			continue;
		}
		if (rc)
			return rc;
		bfs_stash_fill(f->stash, v, rank, epoch, c, e->buf, e->geom);
		k = bfs_epoch_view_copy(v, t, c, e->buf, e->geom, a, b - a, dst);
		bfs_cache_put(f->cache, e);
		if (k == 0) {
			bfs_files_report(
				f, "all/: a chunk's sizes differ from the index (source changed?)",
				0);
			return -EIO;
		}
		a += k;
		dst += k;
	}
	return 0;
}

/* A read of all/F.npy or all.safetensors: assembled from chunks into one
 * buffer (offsets must be shifted, so no zero-copy here). */
static int read_view_file(struct bfs_files *f, const struct bfs_vnode *n, size_t len, uint64_t pos,
			  struct bfs_files_read *r)
{
	uint64_t end, fsize, hlen;
	const struct bfs_geom *g;
	struct bfs_view_ref *vr = NULL;
	uint8_t *buf;
	double rows;
	int rc = bfs_views_get(&vr, f->views, n->rank, n->epoch);

	if (rc)
		return read_failed(f, rc);
	g = vr->v->geom;
	if (n->type == BFS_V_SAFETENSORS) {
		fsize = g->st_size;
		hlen = g->st_hlen;
	} else {
		fsize = bfs_npy_size(&g->g[n->tensor]);
		hlen = g->g[n->tensor].npy_hlen;
	}
	if (pos >= fsize) {
		bfs_views_put(f->views, vr);
		return 0;
	}
	end = pos + len < fsize ? pos + len : fsize;
	buf = r->owned = malloc(end - pos);
	if (!buf) {
		bfs_views_put(f->views, vr);
		return read_failed(f, -ENOMEM);
	}
	if (pos < hlen) { /* the header */
		uint64_t k = (end < hlen ? end : hlen) - pos;
		if (n->type == BFS_V_SAFETENSORS) {
			memcpy(buf, g->st_header + pos, k);
		} else {
			const struct bfs_tensor_geom *tg = &g->g[n->tensor];
			bfs_npy_header(r->hdr, sizeof(r->hdr),
				       bfs_batcher_plan(f->b)->t[n->tensor].dtype, tg->ndim,
				       tg->shape);
			memcpy(buf, r->hdr + pos, k);
		}
	}
	if (n->type == BFS_V_NPY && end > hlen) {
		uint64_t a = pos > hlen ? pos : hlen;
		rc = view_tensor_bytes(f, vr->v, n->rank, n->epoch, (size_t)n->tensor, a - hlen,
				       end - hlen, buf + (a - pos));
	} else if (n->type == BFS_V_SAFETENSORS) {
		/* the tensors lie end to end after the header, in plan order */
		for (size_t t = 0; t < g->ntensors && !rc; t++) {
			uint64_t ts = g->g[t].offset, te = ts + g->g[t].nbytes;
			uint64_t a = pos > ts ? pos : ts, b = end < te ? end : te;
			if (a < b)
				rc = view_tensor_bytes(f, vr->v, n->rank, n->epoch, t, a - ts,
						       b - ts, buf + (a - pos));
		}
	}
	rows = rc ? 0 : bfs_stats_rows(g, hlen, pos, end);
	bfs_views_put(f->views, vr);
	if (rc)
		return read_failed(f, rc);
	bfs_stats_read(&f->reads, end - pos, rows); /* before the reply, as above */
	r->p[0].mem = buf;
	r->p[0].size = end - pos;
	r->count = 1;
	return 0;
}

/* A read of batch-B.cuda: its JSON once the copy is complete. */
static int read_cuda_file(struct bfs_files *f, uint64_t fh, size_t len, uint64_t off,
			  struct bfs_files_read *r)
{
	struct bfs_cudaopen_fh *h = (struct bfs_cudaopen_fh *)(uintptr_t)fh;
	const char *text = NULL;
	size_t tlen = 0;
	int rc;

	if (!h || !f->copen)
		return -EIO;
	rc = bfs_cudaopen_read(f->copen, h, &text, &tlen);
	r->cuda = h;
	if (rc)
		return read_failed(f, rc);
	read_slice(r, text, tlen, off, len);
	return 0;
}

int bfs_files_read(struct bfs_files *f, const struct bfs_vnode *n, uint64_t reader, uint64_t fh,
		   size_t len, uint64_t off, struct bfs_files_read *r)
{
	int rc;

	memset(r, 0, sizeof(*r));
	if (!bfs_files_dynamic(n))
		touch(f, reader);
	switch (n->type) {
	case BFS_V_README:
		read_slice(r, f->readme, f->readme_len, off, len);
		return 0;
	case BFS_V_SCHEMA:
		read_slice(r, f->schema_json, f->schema_len, off, len);
		return 0;
	case BFS_V_STATS:
	case BFS_V_ERRORS:
		r->snap = (struct bfs_snapshot *)(uintptr_t)fh;
		if (r->snap) /* opened with an open request: its own snapshot */
			bfs_snapshot_get(r->snap);
		else
			r->snap = dyn_read(f, dyn_file(n), reader);
		if (!r->snap)
			return -ENOMEM;
		read_slice(r, r->snap->text, r->snap->len, off, len);
		return 0;
	case BFS_V_SAFETENSORS:
	case BFS_V_NPY:
	case BFS_V_CUDA:
		rc = n->type == BFS_V_CUDA ? read_cuda_file(f, fh, len, off, r)
		     : n->all		   ? read_view_file(f, n, len, off, r)
					   : read_batch_file(f, n, len, off, r);
		if (rc < 0) /* once per reader's read (stats.h) */
			bfs_stats_read_failed(&f->reads, n->ino, reader, off, len);
		return rc;
	default:
		return -EISDIR;
	}
}

/* ------------------------------------------------------------ lifecycle */

struct bfs_vfs *bfs_files_vfs(struct bfs_files *f)
{
	return f->vfs;
}

struct bfs_cache *bfs_files_cache(struct bfs_files *f)
{
	return f->cache;
}

struct bfs_cudapath *bfs_files_cuda(struct bfs_files *f)
{
	return f->cuda;
}

struct bfs_cudaopen *bfs_files_cudaopen(struct bfs_files *f)
{
	return f->copen;
}

void bfs_files_set_io(struct bfs_files *f, struct bfs_iostage *io)
{
	f->io = io;
	if (io)
		bfs_cache_set_io(f->cache, bfs_iostage_plan(io));
}

void bfs_files_free(struct bfs_files *f)
{
	if (!f)
		return;
	bfs_cache_free(f->cache); /* its workers first: they pin through the runtime */
	bfs_cudaopen_free(f->copen);
	bfs_cudapath_free(f->cuda);
	bfs_cudapool_free(f->cpool);
	bfs_views_free(f->views);
	bfs_stash_free(f->stash);
	for (unsigned i = 0; i < READERS; i++)
		bfs_snapshot_put(f->readers[i].snap);
	bfs_snapshot_put(f->reported[0]);
	bfs_snapshot_put(f->reported[1]);
	pthread_mutex_destroy(&f->dyn_lock);
	bfs_snapshot_set_free(f->dyn);
	bfs_vfs_free(f->vfs);
	bfs_geom_free(f->geom_full);
	bfs_geom_free(f->geom_last);
	free(f->readme);
	free(f->schema_json);
	bfs_errlog_free(f->errlog);
	bfs_stats_reads_destroy(&f->reads);
	free(f);
}

/* The CUDA path: the runtime loaded (only dlopen here: CUDA itself starts
 * in the detached daemon), its pool, and the opens of batch-B.cuda. */
static int cuda_new(struct bfs_files *f, const struct bfs_fs_config *cfg)
{
	char err[400];
	unsigned pool = cfg->cuda_pool ? cfg->cuda_pool : BFS_CUDA_POOL_DEFAULT;
	int rc;

	if (bfs_cudapath_load(&f->cuda, cfg->cuda_device, pool, err, sizeof(err)) != 0)
		return bfs_err_set(-EINVAL, "option 'cuda': %s", err);
	rc = bfs_cudapool_new(&f->cpool, bfs_cudapath_pool(f->cuda));
	if (rc)
		return rc;
	return 0;
}

int bfs_files_new(struct bfs_files **out, const struct bfs_fs_config *cfg)
{
	struct bfs_files *f = calloc(1, sizeof(*f));
	const struct bfs_plan *plan = bfs_batcher_plan(cfg->batcher);
	uint64_t nb = bfs_batcher_nbatches(cfg->batcher);
	int rc;

	if (!f)
		return -ENOMEM;
	bfs_stats_reads_init(&f->reads);
	pthread_mutex_init(&f->dyn_lock, NULL);
	f->ds = cfg->ds;
	f->b = cfg->batcher;
	f->rb = cfg->nranks ? cfg->ranks : &f->b;
	f->nranks = cfg->nranks ? cfg->nranks : 1;
	f->cache_size = cfg->cache_size;
	f->cuda_device = cfg->cuda_device;
	f->mount_time = time(NULL);
	f->uid = getuid();
	f->gid = getgid();
	f->readme = strdup(cfg->readme ? cfg->readme : "");
	f->schema_json = strdup(cfg->schema_json ? cfg->schema_json : "{}\n");
	if (!f->readme || !f->schema_json ||
	    bfs_errlog_new(&f->errlog, BFS_ERRLOG_MAX_LINES, stderr) != 0 ||
	    bfs_snapshot_set_new(&f->dyn, 2, dyn_text, f) != 0) {
		rc = -ENOMEM;
		goto fail;
	}
	f->readme_len = strlen(f->readme);
	f->schema_len = strlen(f->schema_json);
	if (cfg->cuda_device >= 0) {
		rc = cuda_new(f, cfg);
		if (rc)
			goto fail;
	}
	rc = bfs_vfs_new(&f->vfs, plan, nb, cfg->epochs, cfg->cuda_device >= 0, cfg->nranks);
	if (!rc)
		rc = bfs_views_new(&f->views, f->rb, f->nranks, NVIEWS);
	if (rc)
		goto fail;
	if (plan->nslots == 0 && nb > 0) {
		rc = bfs_batcher_geom(&f->geom_full, f->b, 0, 0);
		if (!rc)
			rc = bfs_batcher_geom(&f->geom_last, f->b, 0, nb - 1);
		if (rc)
			goto fail;
	}
	/* a sixteenth of cache_size for all/'s small tensors, out of the cache's
	 * budget: the daemon stays within cache_size (docs/contract.md) */
	rc = bfs_stash_new(&f->stash, cfg->cache_size / 16);
	if (!rc)
		rc = bfs_cache_new(&f->cache, f->rb, f->nranks,
				   cfg->cache_size - cfg->cache_size / 16, cfg->threads,
				   cfg->prefetch, bfs_files_report, f);
	if (rc)
		goto fail;
	bfs_cache_set_epochs(f->cache, cfg->epochs);
	if (f->cuda) {
		struct bfs_cudaopen_config co = {
			.cache = f->cache,
			.cuda = f->cuda,
			.pool = f->cpool,
			.plan = plan,
			.device = cfg->cuda_device,
			.report = bfs_files_report,
			.report_ctx = f,
		};

		bfs_cache_set_pinning(f->cache, bfs_cudapath_pin, bfs_cudapath_unpin, f->cuda);
		rc = bfs_cudaopen_new(&f->copen, &co);
		if (rc)
			goto fail;
	}
	*out = f;
	return 0;
fail:
	bfs_files_free(f);
	return rc;
}
