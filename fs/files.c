/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files.c — the files of a mount, their sizes and their bytes (see
 * files.h).
 */
#include "files.h"

#include "cred.h"
#include "cudapool.h"
#include "errlog.h"
#include "objsrc.h"
#include "stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
	/* stats.json and errors.txt: a snapshot per reader; their generation
	 * is their mtime, in ns past the mount's */
	struct bfs_dynfiles *dyn;
	struct bfs_allfiles *all; /* the files of all/ and all.safetensors */
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
	st.bytes += bfs_allfiles_stash_bytes(f->all);
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

/* dynfiles' text function */
static char *dyn_text(void *arg, enum bfs_dynfile k, size_t pad, size_t *len)
{
	struct bfs_files *f = arg;

	return k == BFS_DYN_STATS ? stats_text(f, pad, len) : errors_text(f, len);
}

static enum bfs_dynfile dyn_file(const struct bfs_vnode *n)
{
	return n->type == BFS_V_STATS ? BFS_DYN_STATS : BFS_DYN_ERRORS;
}

int bfs_files_open_snapshot(struct bfs_files *f, const struct bfs_vnode *n,
			    struct bfs_snapshot **out)
{
	return bfs_dynfiles_open(f->dyn, dyn_file(n), out);
}

void bfs_files_release(struct bfs_files *f, const struct bfs_vnode *n, uint64_t fh)
{
	if (n->type == BFS_V_CUDA)
		bfs_cudaopen_put(f->copen, (struct bfs_cudaopen_fh *)(uintptr_t)fh);
	else
		bfs_snapshot_put((struct bfs_snapshot *)(uintptr_t)fh);
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
		return bfs_dynfiles_size(f->dyn, dyn_file(n), who ? who->reader : 0,
					 who && who->reading, size, mtime_ns);
	case BFS_V_SAFETENSORS:
	case BFS_V_NPY:
		if (n->all)
			return bfs_allfiles_size(f->all, n, size);
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

/* A read of all/F.npy or all.safetensors: assembled into one buffer
 * (offsets must be shifted, so no zero-copy here). */
static int read_view_file(struct bfs_files *f, const struct bfs_vnode *n, size_t len, uint64_t pos,
			  struct bfs_files_read *r)
{
	size_t got = 0;
	double rows = 0;
	int rc = bfs_allfiles_read(f->all, n, pos, len, &r->owned, &got, &rows);

	if (rc)
		return read_failed(f, rc);
	if (!got)
		return 0;
	bfs_stats_read(&f->reads, got, rows); /* before the reply, as above */
	r->p[0].mem = r->owned;
	r->p[0].size = got;
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
		bfs_dynfiles_touch(f->dyn, reader);
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
			r->snap = bfs_dynfiles_read(f->dyn, dyn_file(n), reader);
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
	bfs_allfiles_free(f->all);
	bfs_dynfiles_free(f->dyn);
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
	    bfs_dynfiles_new(&f->dyn, dyn_text, f) != 0) {
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
	rc = bfs_cache_new(&f->cache, f->rb, f->nranks, cfg->cache_size - cfg->cache_size / 16,
			   cfg->threads, cfg->prefetch, bfs_files_report, f);
	if (!rc)
		rc = bfs_allfiles_new(&f->all, f->rb, f->nranks, f->cache, cfg->cache_size / 16,
				      bfs_files_report, f);
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
