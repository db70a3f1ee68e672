/*
 * fuse_ops.c — the FUSE session and its handlers (see fuse_ops.h). The
 * only file that includes <fuse_lowlevel.h>.
 */
#define FUSE_USE_VERSION 312

#include "fuse_ops.h"

#include "cache.h"
#include "cudapath.h"
#include "cred.h"
#include "cudapool.h"
#include "epoch.h"
#include "errlog.h"
#include "iostage.h"
#include "lifecycle.h"
#include "objsrc.h"
#include "snapshot.h"
#include "stash.h"
#include "stats.h"
#include "vfs.h"
#include "views.h"

#include <fuse_lowlevel.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Files are immutable for the life of the mount: cache names and
 * attributes for a long time. */
#define LONG_TIMEOUT 86400.0
#define READ_CHUNK (1u << 20)
#define NVIEWS 8 /* epoch views kept (geometry and chunk totals of all/) */

struct bfs_fs {
	const struct bfs_dataset *ds;
	const struct bfs_batcher *b; /* rank 0's (the plan, the facts) */
	const struct bfs_batcher *const *rb; /* [nranks]: each rank's */
	size_t nranks; /* 1 without rank folders */
	struct bfs_cache *cache;
	/* the I/O stage (io_depth), started in the daemon; NULL when reads go
	 * to the source from the decoders */
	struct bfs_iostage *io;
	struct bfs_vfs *vfs;
	struct bfs_fs_config cfg;
	/* set before the helper threads start, cleared after they ended */
	struct fuse_session *se;
	char *readme, *schema_json, *options_text;
	size_t readme_len, schema_len;
	time_t mount_time;
	uid_t uid;
	gid_t gid;
	/* geometry of a full batch and of the last one, when no tensor is
	 * ragged (then every batch but the last has the same sizes) */
	struct bfs_geom *geom_full, *geom_last;

	/* no OPEN/RELEASE (OPENDIR) round trips: the kernel took ENOSYS for them */
	bool no_open, no_opendir;
	/* snapshots of stats.json (DYN_STATS) and errors.txt (DYN_ERRORS);
	 * their generation is their mtime, in ns past the mount's */
	struct bfs_snapshot_set *dyn;

	struct bfs_views *views; /* of all/: geometry and chunk totals */
	struct bfs_stash *stash; /* all/'s small tensors, so columns cost one pass */

	struct bfs_errlog *errlog; /* errors.txt */
	struct bfs_stats_reads reads; /* reads served, for stats.json */

	/* the CUDA path (-o cuda); NULL when off */
	struct bfs_cudapath *cuda;
	struct bfs_cudapool *cpool; /* who holds which buffer, who waits */
};

/* An open batch-B.cuda: a pool buffer holding the batch, copied from the
 * pinned cache entry, which is held until the descriptor is closed. */
struct cfh {
	unsigned slot;
	struct bfs_cache_entry *e;
	char *json;
	size_t len;
	pthread_mutex_t m; /* guards waited, err */
	bool waited;
	int err;
	int refs; /* the open file's, plus one per read being replied to */
};

/* An OPEN of batch-B.cuda waiting for a free buffer. */
struct cwait {
	struct bfs_cudapool_waiter w; /* w.tag: req */
	fuse_req_t req;
	uint64_t rank, epoch, batch;
	struct fuse_file_info fi;
};

static struct cwait *cwait_of(struct bfs_cudapool_waiter *w)
{
	return (struct cwait *)((char *)w - offsetof(struct cwait, w));
}

/* ------------------------------------------------------------- errors */

void bfs_fs_report(void *arg, const char *msg, unsigned flags)
{
	struct bfs_fs *fs = arg;

	bfs_errlog_add_as(fs->errlog, msg, flags & BFS_REPORT_SKIPPED, flags & BFS_REPORT_SOURCE);
}

/* ------------------------------------------------------------ dynamic */

/* stats.json's text, padded to `pad` bytes (0: not padded). */
static char *stats_text(struct bfs_fs *fs, size_t pad, size_t *len)
{
	struct bfs_stats_snap snap = { 0 };
	struct bfs_cache_stats st;
	struct bfs_errlog_counts ec;

	bfs_stats_put_dataset(&snap, fs->ds, bfs_batcher_nbatches(fs->b));
	bfs_cache_stats(fs->cache, &st);
	st.budget += fs->cfg.cache_size / 16; /* the stash's share (bfs_fs_new) */
	st.bytes += bfs_stash_bytes(fs->stash);
	bfs_stats_put_cache(&snap, &st);
	bfs_errlog_counts(fs->errlog, &ec);
	bfs_stats_put_errors(&snap, &ec);
	bfs_stats_put_reads(&snap, &fs->reads);
	if (fs->io)
		bfs_iostage_stats(fs->io, &snap);
	if (bfs_dataset_objsrc(fs->ds) && bfs_objsrc_keeper(bfs_dataset_objsrc(fs->ds)))
		bfs_stats_put_cred(&snap, bfs_objsrc_keeper(bfs_dataset_objsrc(fs->ds)));
	if (fs->cuda) {
		struct bfs_cudapath_stats cs;
		struct bfs_cudapool_stats ps;

		bfs_cudapath_stats(fs->cuda, &cs);
		bfs_cudapool_stats(fs->cpool, &ps);
		bfs_stats_put_cuda(&snap, bfs_cudapath_device(fs->cuda), &ps, &cs);
	}
	snap.v[BFS_STAT_UPTIME_SECONDS].i = (int64_t)(time(NULL) - fs->mount_time);
	return bfs_stats_json(&snap, pad, len);
}

static char *errors_text(struct bfs_fs *fs, size_t *len)
{
	struct bfs_cred_keeper *k =
		bfs_dataset_objsrc(fs->ds) ? bfs_objsrc_keeper(bfs_dataset_objsrc(fs->ds)) : NULL;
	char line[700], msg[800], when[32];

	/* a bucket's credentials that cannot be refreshed: a line a minute at
	 * most (the keeper says when one is due), stamped with its minute */
	if (k && bfs_cred_keeper_errline(k, line, sizeof(line))) {
		time_t now = time(NULL);
		struct tm tm;

		gmtime_r(&now, &tm);
		strftime(when, sizeof(when), "%H:%M UTC", &tm);
		snprintf(msg, sizeof(msg), "%s (%s)", line, when);
		bfs_errlog_add(fs->errlog, msg, false);
	}
	return bfs_errlog_text(fs->errlog, len);
}

enum { DYN_STATS, DYN_ERRORS };

static unsigned dyn_file(const struct bfs_vnode *n)
{
	return n->type == BFS_V_STATS ? DYN_STATS : DYN_ERRORS;
}

/* A snapshot's text: stats.json padded to its fixed size (errors.txt only
 * grows, so an older size is a prefix of it). */
static char *dyn_text(void *arg, unsigned k, size_t *len)
{
	struct bfs_fs *fs = arg;

	return k == DYN_STATS ? stats_text(fs, BFS_STATS_SIZE, len) : errors_text(fs, len);
}

/* -------------------------------------------------------------- sizes */

/* Geometry of (epoch, batch): borrowed from the fixed ones, or computed
 * (*owned set: free it). */
static int get_geom(struct bfs_fs *fs, uint64_t r, uint64_t e, uint64_t b, struct bfs_geom **g,
		    bool *owned)
{
	bool last = b + 1 == bfs_batcher_nbatches(fs->b);

	*owned = false;
	/* (ranks differ only in their last batch, which may be short) */
	if (fs->geom_full && (!last || fs->nranks == 1)) {
		*g = last ? fs->geom_last : fs->geom_full;
		return 0;
	}
	*owned = true;
	return bfs_batcher_geom(g, fs->rb[r], e, b);
}

/* *mtime_ns (may be NULL) gets a dynamic file's snapshot number. */
static int node_size(struct bfs_fs *fs, const struct bfs_vnode *n, uint64_t *size,
		     uint64_t *mtime_ns)
{
	struct bfs_geom *g;
	bool owned;
	int rc;

	switch (n->type) {
	case BFS_V_README:
		*size = fs->readme_len;
		return 0;
	case BFS_V_SCHEMA:
		*size = fs->schema_len;
		return 0;
	case BFS_V_STATS:
	case BFS_V_ERRORS: {
		uint64_t gen;
		struct bfs_snapshot *h = bfs_snapshot_refresh(fs->dyn, dyn_file(n), &gen);
		if (!h)
			return -ENOMEM;
		*size = h->len;
		bfs_snapshot_put(h);
		if (mtime_ns)
			*mtime_ns = gen;
		return 0;
	}
	case BFS_V_SAFETENSORS:
	case BFS_V_NPY:
		if (n->all) {
			struct bfs_view_ref *r;
			rc = bfs_views_get(&r, fs->views, n->rank, n->epoch);
			if (rc)
				return rc;
			g = r->v->geom;
			*size = n->type == BFS_V_SAFETENSORS ? g->st_size
							     : bfs_npy_size(&g->g[n->tensor]);
			bfs_views_put(fs->views, r);
			return 0;
		}
		rc = get_geom(fs, n->rank, n->epoch, n->batch, &g, &owned);
		if (rc)
			return rc;
		*size = n->type == BFS_V_SAFETENSORS ? g->st_size : bfs_npy_size(&g->g[n->tensor]);
		if (owned)
			bfs_geom_free(g);
		return 0;
	case BFS_V_CUDA: {
		size_t len = 0;
		char *d;
		rc = get_geom(fs, n->rank, n->epoch, n->batch, &g, &owned);
		if (rc)
			return rc;
		d = bfs_cudapath_describe(bfs_batcher_plan(fs->b), g, fs->cfg.cuda_device, NULL,
					  &len);
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

static int fill_attr(struct bfs_fs *fs, const struct bfs_vnode *n, struct stat *st)
{
	uint64_t size = 0, gen = 0;
	int rc;

	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_atime = st->st_mtime = st->st_ctime = fs->mount_time;
	st->st_blksize = READ_CHUNK;
	if (bfs_vnode_is_dir(n)) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return 0;
	}
	rc = node_size(fs, n, &size, &gen);
	if (rc)
		return rc;
	if (gen) { /* a dynamic file: a new mtime per snapshot */
		st->st_mtim.tv_sec = fs->mount_time + (time_t)(gen / 1000000000u);
		st->st_mtim.tv_nsec = (long)(gen % 1000000000u);
	}
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_size = (off_t)size;
	st->st_blocks = (blkcnt_t)((size + 511) / 512);
	return 0;
}

static bool is_dynamic(const struct bfs_vnode *n)
{
	return n->type == BFS_V_STATS || n->type == BFS_V_ERRORS;
}

/* ------------------------------------------------------------ handlers
 *
 * Each request is answered by its op_ function, once, from one place: a
 * do_ function does the work and returns 0 or a negative errno (and fills
 * the answer), then the op_ function replies with the answer or the error.
 * The CUDA path's OPEN is the exception (below).
 */

static struct bfs_fs *FS(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct bfs_fs *fs = userdata;

	/* Every file is immutable (stats.json and errors.txt are handled by
	 * their attributes), so OPEN, RELEASE and OPENDIR carry nothing: answering
	 * ENOSYS once spares a round trip per file (FUSE_NO_OPEN_SUPPORT). */
	fs->no_open = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) && !fs->cfg.keep_open;
	fs->no_opendir = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) && !fs->cfg.keep_open;
	if (fs->no_open)
		conn->want |= conn->capable & FUSE_CAP_AUTO_INVAL_DATA;
	/* large requests: the kernel caps these at what it supports */
	conn->max_readahead = conn->max_readahead > READ_CHUNK ? conn->max_readahead : READ_CHUNK;
	conn->max_write = READ_CHUNK; /* also raises max_pages for reads */
	if (fs->cfg.max_read) /* libfuse checks that we ask for the mount's own */
		conn->max_read = fs->cfg.max_read;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	conn->want &= ~(unsigned)FUSE_CAP_ASYNC_READ;
	conn->want |= conn->capable & FUSE_CAP_ASYNC_READ;
}

/* n's entry: its attributes and how long the kernel may keep them. */
static int fill_entry(struct bfs_fs *fs, const struct bfs_vnode *n, struct fuse_entry_param *e)
{
	int rc = fill_attr(fs, n, &e->attr);

	if (rc)
		return rc;
	e->ino = n->ino;
	e->generation = 1;
	e->attr_timeout = is_dynamic(n) ? 0 : LONG_TIMEOUT;
	e->entry_timeout = LONG_TIMEOUT;
	return 0;
}

static int do_lookup(struct bfs_fs *fs, fuse_ino_t parent, const char *name,
		     struct fuse_entry_param *e)
{
	struct bfs_vnode dir, n;
	int rc = bfs_vfs_get(fs->vfs, parent, &dir);

	memset(e, 0, sizeof(*e));
	if (!rc)
		rc = bfs_vfs_lookup(fs->vfs, &dir, name, &n);
	if (!rc)
		rc = fill_entry(fs, &n, e);
	if (rc == -ENOENT) { /* cache the negative answer too: names never appear */
		e->ino = 0;
		e->entry_timeout = LONG_TIMEOUT;
		return 0;
	}
	return rc;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int rc = do_lookup(FS(req), parent, name, &e);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

static int do_getattr(struct bfs_fs *fs, fuse_ino_t ino, struct stat *st, double *timeout)
{
	struct bfs_vnode n;
	int rc = bfs_vfs_get(fs->vfs, ino, &n);

	if (!rc)
		rc = fill_attr(fs, &n, st);
	if (!rc)
		*timeout = is_dynamic(&n) ? 0 : LONG_TIMEOUT;
	return rc;
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	double timeout = 0;
	int rc = do_getattr(FS(req), ino, &st, &timeout);

	(void)fi;
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, timeout);
}

static int do_opendir(struct bfs_fs *fs, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct bfs_vnode n;
	int rc = bfs_vfs_get(fs->vfs, ino, &n);

	if (rc)
		return rc;
	if (!bfs_vnode_is_dir(&n))
		return -ENOTDIR;
	if (fs->no_opendir)
		return -ENOSYS; /* the kernel then caches listings itself (FOPEN_CACHE_DIR) */
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	return 0;
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int rc = do_opendir(FS(req), ino, fi);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_open(req, fi);
}

/* READDIR, and READDIRPLUS (plus): each entry with its attributes and a
 * lookup reference, so that a reader who lists a batch folder and then opens
 * its files costs no LOOKUP round trip per file. The entries of ino from
 * offset off, at most size bytes of them, into *buf (malloc'd), *used bytes
 * (req only formats them). */
static int do_readdir(struct bfs_fs *fs, fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      bool plus, char **buf, size_t *used)
{
	struct bfs_vnode dir, n;
	int rc = bfs_vfs_get(fs->vfs, ino, &dir);

	if (rc)
		return rc;
	*buf = malloc(size);
	if (!*buf)
		return -ENOMEM;
	*used = 0;
	/* offsets: 0 ".", 1 "..", 2+i child i */
	for (uint64_t i = (uint64_t)off;; i++) {
		char name[512];
		struct fuse_entry_param e;
		size_t ent;

		memset(&e, 0, sizeof(e));
		if (i == 0) {
			strcpy(name, ".");
			e.attr.st_ino = dir.ino;
			e.attr.st_mode = S_IFDIR;
		} else if (i == 1) {
			strcpy(name, "..");
			e.attr.st_ino = bfs_vfs_parent(fs->vfs, &dir);
			e.attr.st_mode = S_IFDIR;
		} else {
			if (bfs_vfs_child(fs->vfs, &dir, i - 2, &n, name, sizeof(name)) != 0)
				break;
			e.attr.st_ino = n.ino;
			e.attr.st_mode = bfs_vnode_is_dir(&n) ? S_IFDIR : S_IFREG;
			/* an entry whose attributes fail is listed without them: its
			 * LOOKUP then reports the error */
			if (plus)
				(void)fill_entry(fs, &n, &e);
		}
		ent = plus ? fuse_add_direntry_plus(req, *buf + *used, size - *used, name, &e,
						    (off_t)(i + 1))
			   : fuse_add_direntry(req, *buf + *used, size - *used, name, &e.attr,
					       (off_t)(i + 1));
		if (ent > size - *used)
			break;
		*used += ent;
	}
	return 0;
}

static void list_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	char *buf = NULL;
	size_t used = 0;
	int rc = do_readdir(FS(req), req, ino, size, off, plus, &buf, &used);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	list_dir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	list_dir(req, ino, size, off, true);
}

/* ------------------------------------------------------------ the CUDA path
 *
 * An OPEN of batch-B.cuda is answered on a path of its own: with the pool
 * of device buffers taken, it waits without holding a thread, and is
 * answered later from the thread that gives a buffer back (cuda_put_slot),
 * or from the interrupt callback when its opener gives up.
 */

static void cuda_fail(struct bfs_fs *fs, const char *what, uint64_t e, uint64_t b, const char *msg)
{
	char line[600];

	bfs_cudapool_failed(fs->cpool);
	snprintf(line, sizeof(line),
		 "epoch-%04" PRIu64 "/batch-%06" PRIu64 "/batch-%06" PRIu64 ".cuda: %s: %s", e, b,
		 b, what, msg);
	bfs_fs_report(fs, line, false);
}

/* A descriptor's buffer goes back to the pool once its copy is over (a
 * failed wait is reported as `what`, NULL: not reported). */
static void cuda_put_slot(struct bfs_fs *fs, unsigned slot);

static void cfh_free(struct bfs_fs *fs, struct cfh *h, const char *what)
{
	char err[400];

	/* the copy must be over before its source and buffer are reused */
	if (bfs_cudapath_wait(fs->cuda, h->slot, err, sizeof(err)) != 0 && what)
		cuda_fail(fs, what, h->e->epoch, h->e->batch, err);
	bfs_cache_put(fs->cache, h->e);
	pthread_mutex_destroy(&h->m);
	free(h->json);
	cuda_put_slot(fs, h->slot);
	free(h);
}

/* Copy (rank r, epoch e, batch b) into pool buffer `slot` (ours): the copy
 * runs on the buffer's stream while the OPEN is answered. On failure the
 * buffer goes back to the pool. */
static int do_cuda_open(struct bfs_fs *fs, uint64_t r, uint64_t e, uint64_t b, unsigned slot,
			struct cfh **out)
{
	struct cfh *h = calloc(1, sizeof(*h));
	char hex[BFS_CUDA_HANDLE_HEX + 1], err[400];
	int rc = h ? 0 : -ENOMEM;

	if (!rc)
		rc = bfs_cache_get(&h->e, fs->cache, r, e, b);
	if (!rc && !h->e->pinned) {
		cuda_fail(fs, "open", e, b,
			  "the batch is not in pinned memory (cudaHostAlloc failed)");
		rc = -ENOMEM;
	}
	if (!rc) {
		rc = bfs_cudapath_copy(fs->cuda, slot, h->e->buf, h->e->geom->st_size, hex, err,
				       sizeof(err));
		if (rc)
			cuda_fail(fs, "open", e, b, err);
	}
	if (!rc) {
		h->json = bfs_cudapath_describe(bfs_batcher_plan(fs->b), h->e->geom,
						fs->cfg.cuda_device, hex, &h->len);
		if (!h->json) {
			/* the copy may be in flight: wait before the buffer is reused */
			bfs_cudapath_wait(fs->cuda, slot, err, sizeof(err));
			rc = -ENOMEM;
		}
	}
	if (rc) {
		if (h && h->e)
			bfs_cache_put(fs->cache, h->e);
		free(h);
		cuda_put_slot(fs, slot);
		return rc == -ENOMEM || rc == -ENOENT ? rc : -EIO;
	}
	h->slot = slot;
	h->refs = 1;
	pthread_mutex_init(&h->m, NULL);
	bfs_cudapool_opened(fs->cpool);
	*out = h;
	return 0;
}

/* The answer to an OPEN of batch-B.cuda that holds buffer `slot`. */
static void cuda_answer(struct bfs_fs *fs, fuse_req_t req, uint64_t r, uint64_t e, uint64_t b,
			struct fuse_file_info *fi, unsigned slot)
{
	struct cfh *h = NULL;
	int rc = do_cuda_open(fs, r, e, b, slot, &h);

	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = 1; /* every read comes here: it waits for the copy */
	fi->keep_cache = 0;
	if (fuse_reply_open(req, fi) != 0) /* the opener is gone: no RELEASE will come */
		cfh_free(fs, h, NULL);
}

/* A buffer comes back: to the first waiting OPEN, else to the pool. */
static void cuda_put_slot(struct bfs_fs *fs, unsigned slot)
{
	struct bfs_cudapool_waiter *w = bfs_cudapool_put(fs->cpool, slot);

	if (w) {
		struct cwait *c = cwait_of(w);

		cuda_answer(fs, c->req, c->rank, c->epoch, c->batch, &c->fi, slot);
		free(c);
	}
}

/* The opener of a waiting OPEN got a signal: it gives up (EINTR). */
static void cuda_interrupted(fuse_req_t req, void *data)
{
	struct bfs_fs *fs = data;
	struct bfs_cudapool_waiter *w = bfs_cudapool_cancel(fs->cpool, req);

	if (w) {
		fuse_reply_err(req, EINTR);
		free(cwait_of(w));
	}
}

static bool req_gone(const void *tag)
{
	return fuse_req_interrupted((fuse_req_t)(uintptr_t)tag);
}

/* OPEN of batch-B.cuda: take a pool buffer, or wait for one without holding
 * a thread (the request is answered when a descriptor is closed), or
 * EAGAIN under O_NONBLOCK. */
static void cuda_open(struct bfs_fs *fs, fuse_req_t req, const struct bfs_vnode *n,
		      struct fuse_file_info *fi)
{
	struct cwait *c = calloc(1, sizeof(*c));
	int slot;

	if (!c) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	c->w.tag = req;
	c->req = req;
	c->rank = n->rank;
	c->epoch = n->epoch;
	c->batch = n->batch;
	c->fi = *fi;
	if (!(fi->flags & O_NONBLOCK))
		fuse_req_interrupt_func(req, cuda_interrupted, fs);
	slot = bfs_cudapool_take(fs->cpool, &c->w, fi->flags & O_NONBLOCK, req_gone);
	if (slot == -EINPROGRESS) /* queued: c belongs to the pool's queue now */
		return;
	free(c);
	if (slot < 0)
		fuse_reply_err(req, -slot);
	else
		cuda_answer(fs, req, n->rank, n->epoch, n->batch, fi, (unsigned)slot);
}

/* Drop a reference to an open descriptor; the last one (after the RELEASE
 * and every read's reply: the reader may close the file while its read's
 * reply is still being written) gives its buffer back. */
static void cfh_put(struct bfs_fs *fs, struct cfh *h)
{
	if (h && __atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) == 0)
		cfh_free(fs, h, "close");
}

/* ------------------------------------------------------------ open, release */

/* OPEN of anything but batch-B.cuda (*n says which it was). */
static int do_open(struct bfs_fs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
		   struct bfs_vnode *n)
{
	int rc = bfs_vfs_get(fs->vfs, ino, n);

	if (rc)
		return rc;
	if (bfs_vnode_is_dir(n))
		return -EISDIR;
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))
		return -EROFS;
	if (n->type == BFS_V_CUDA)
		return 0; /* cuda_open answers it */
	if (fs->no_open) /* the kernel opens every file without asking from now on */
		return -ENOSYS;
	if (is_dynamic(n)) { /* opened with an OPEN request: a snapshot of its own */
		size_t len = 0;
		char *text =
			n->type == BFS_V_STATS ? stats_text(fs, 0, &len) : errors_text(fs, &len);
		struct bfs_snapshot *h = text ? bfs_snapshot_new(text, len) : NULL;

		if (!h)
			return -ENOMEM;
		fi->fh = (uint64_t)(uintptr_t)h;
		fi->direct_io = 1;
	} else {
		fi->keep_cache = 1;
	}
	return 0;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct bfs_fs *fs = FS(req);
	struct bfs_vnode n;
	int rc = do_open(fs, ino, fi, &n);

	if (!rc && n.type == BFS_V_CUDA)
		cuda_open(fs, req, &n, fi); /* answered on the CUDA path's own */
	else if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_open(req, fi);
}

/* A file closed: its snapshot, or its descriptor's reference, goes. */
static void do_release(struct bfs_fs *fs, fuse_ino_t ino, uint64_t fh)
{
	struct bfs_vnode n;

	if (bfs_vfs_get(fs->vfs, ino, &n) == 0 && n.type == BFS_V_CUDA)
		cfh_put(fs, (struct cfh *)(uintptr_t)fh);
	else
		bfs_snapshot_put((struct bfs_snapshot *)(uintptr_t)fh);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct bfs_fs *fs = FS(req);
	uint64_t fh = fi->fh;

	/* answered first: the last reference to a descriptor waits for its copy */
	fuse_reply_err(req, 0);
	do_release(fs, ino, fh);
}

/* ------------------------------------------------------------------ read */

/* The answer to a READ: up to two pieces of memory (a .npy header built
 * for the read, then data), and what they borrow, released once the reply
 * is written. */
struct read_reply {
	struct fuse_bufvec v; /* v.buf[0], then `extra` as v.buf[1] */
	struct fuse_buf extra;
	bool splice; /* the cache's buffer: fuse_reply_data may splice it */
	char hdr[1024]; /* a .npy header */
	struct bfs_cache_entry *entry;
	struct bfs_snapshot *snap;
	struct cfh *cuda;
	uint8_t *owned;
};

static void read_reply_init(struct read_reply *r)
{
	memset(r, 0, sizeof(*r));
	r->v.count = 1;
	r->v.buf[0].fd = -1;
	r->extra.fd = -1;
}

/* Bytes [off, off + size) of data[0, len), as the reply's one piece. */
static void read_slice(struct read_reply *r, const void *data, size_t len, off_t off, size_t size)
{
	if ((uint64_t)off >= len)
		return;
	if (size > len - (size_t)off)
		size = len - (size_t)off;
	r->v.buf[0].mem = (char *)data + off;
	r->v.buf[0].size = size;
}

static void read_done(struct bfs_fs *fs, struct read_reply *r)
{
	if (r->entry)
		bfs_cache_put(fs->cache, r->entry);
	bfs_snapshot_put(r->snap);
	cfh_put(fs, r->cuda);
	free(r->owned);
}

/* A read of a batch or view file failed (rc < 0): counted; EIO, or ENOMEM. */
static int read_failed(struct bfs_fs *fs, int rc)
{
	bfs_stats_read_failed(&fs->reads);
	return rc == -ENOMEM ? -ENOMEM : -EIO;
}

/* batch-B.safetensors, or a .npy of batch-B/: straight from the cache
 * entry's buffer (held until the reply is written), a .npy's header built
 * here; no copy. */
static int read_batch_file(struct bfs_fs *fs, const struct bfs_vnode *n, size_t size, off_t off,
			   struct read_reply *r)
{
	const struct bfs_tensor_geom *g;
	uint64_t fsize, hlen, rows_hlen, pos = (uint64_t)off;
	struct bfs_cache_entry *e = NULL;
	struct fuse_buf *b = r->v.buf;
	const uint8_t *data;
	double rows;
	size_t left;
	int rc;

	rc = bfs_cache_get(&e, fs->cache, n->rank, n->epoch, n->batch);
	if (rc)
		return read_failed(fs, rc);
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
	if (size > fsize - pos)
		size = (size_t)(fsize - pos);
	rows = bfs_stats_rows(e->geom, rows_hlen, pos, pos + size);
	r->splice = true;
	r->v.count = 0;
	left = size;
	if (pos < hlen) {
		size_t k = (size_t)(hlen - pos) < left ? (size_t)(hlen - pos) : left;
		bfs_npy_header(r->hdr, sizeof(r->hdr), bfs_batcher_plan(fs->b)->t[n->tensor].dtype,
			       g->ndim, g->shape);
		b->mem = r->hdr + pos;
		b->size = k;
		r->v.count++;
		b = &r->extra;
		left -= k;
		pos = hlen;
	}
	if (left) {
		b->mem = (void *)(data + (pos - hlen));
		b->size = left;
		r->v.count++;
	}
	/* counted before the reply: a reader that reads stats.json after its
	 * read returned sees the read in it */
	bfs_stats_read(&fs->reads, size, rows);
	return 0;
}

/* Bytes [a, b) of fixed-size-row tensor t's data in the epoch view
 * (rowb bytes a row), from the batches that hold those rows: row i*B + j
 * is row j of batch i. For a chunk that failed (a corrupt record under
 * on_corrupt=fail): only the batch holding the record fails. */
static int view_rows_from_batches(struct bfs_fs *fs, uint64_t rank, uint64_t epoch, size_t t,
				  uint64_t rowb, uint64_t a, uint64_t b, uint8_t *dst)
{
	const struct bfs_batcher *bt = fs->rb[rank];
	uint64_t B = bfs_batcher_batch_len(bt, 0);

	while (a < b && B) {
		uint64_t r = a / rowb, i = r / B, j = r % B, n, k;
		struct bfs_cache_entry *e = NULL;
		const struct bfs_tensor_geom *g;
		int rc = bfs_cache_get(&e, fs->cache, rank, epoch, i);

		if (rc)
			return rc;
		g = &e->geom->g[t];
		n = bfs_batcher_batch_len(bt, i);
		if (g->nbytes != n * rowb || j >= n) { /* not rows of rowb bytes */
			bfs_cache_put(fs->cache, e);
			return -EIO;
		}
		k = (n - j) * rowb - a % rowb;
		if (k > b - a)
			k = b - a;
		memcpy(dst, e->buf + g->offset + j * rowb + a % rowb, k);
		bfs_cache_put(fs->cache, e);
		a += k;
		dst += k;
	}
	return a < b ? -EIO : 0;
}

/* Bytes [a, b) of tensor t's data in the epoch view, from the chunks that
 * hold them (decoded on demand, prefetched ahead), or from the stash of
 * small tensors (stash.h), which every chunk in hand fills. */
static int view_tensor_bytes(struct bfs_fs *fs, const struct bfs_epoch_view *v, uint64_t rank,
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

		k = bfs_stash_read(fs->stash, v, rank, epoch, t, c, a, b - a, dst);
		if (k) {
			a += k;
			dst += k;
			continue;
		}
		rc = bfs_cache_get(&e, fs->cache, rank, epoch, c | BFS_CHUNK);
		if (rc == -EIO && rowb) {
			/* a corrupt record failed the chunk: its other rows come
			 * from their batches, so only its batch's rows fail */
			uint64_t end = (c + 1) * v->chunk_rows * rowb;

			k = end < b ? end - a : b - a;
			rc = view_rows_from_batches(fs, rank, epoch, t, rowb, a, a + k, dst);
			if (rc)
				return rc;
			a += k;
			dst += k;
			continue;
		}
		if (rc)
			return rc;
		bfs_stash_fill(fs->stash, v, rank, epoch, c, e->buf, e->geom);
		k = bfs_epoch_view_copy(v, t, c, e->buf, e->geom, a, b - a, dst);
		bfs_cache_put(fs->cache, e);
		if (k == 0) {
			bfs_fs_report(
				fs, "all/: a chunk's sizes differ from the index (source changed?)",
				false);
			return -EIO;
		}
		a += k;
		dst += k;
	}
	return 0;
}

/* A read of all/F.npy or all.safetensors: assembled from chunks into one
 * buffer (offsets must be shifted, so no zero-copy here). */
static int read_view_file(struct bfs_fs *fs, const struct bfs_vnode *n, size_t size, off_t off,
			  struct read_reply *r)
{
	uint64_t pos = (uint64_t)off, end, fsize, hlen;
	const struct bfs_geom *g;
	struct bfs_view_ref *vr = NULL;
	uint8_t *buf;
	double rows;
	int rc = bfs_views_get(&vr, fs->views, n->rank, n->epoch);

	if (rc)
		return read_failed(fs, rc);
	g = vr->v->geom;
	if (n->type == BFS_V_SAFETENSORS) {
		fsize = g->st_size;
		hlen = g->st_hlen;
	} else {
		fsize = bfs_npy_size(&g->g[n->tensor]);
		hlen = g->g[n->tensor].npy_hlen;
	}
	if (pos >= fsize) {
		bfs_views_put(fs->views, vr);
		return 0;
	}
	end = pos + size < fsize ? pos + size : fsize;
	buf = r->owned = malloc(end - pos);
	if (!buf) {
		bfs_views_put(fs->views, vr);
		return read_failed(fs, -ENOMEM);
	}
	if (pos < hlen) { /* the header */
		uint64_t k = (end < hlen ? end : hlen) - pos;
		if (n->type == BFS_V_SAFETENSORS) {
			memcpy(buf, g->st_header + pos, k);
		} else {
			const struct bfs_tensor_geom *tg = &g->g[n->tensor];
			bfs_npy_header(r->hdr, sizeof(r->hdr),
				       bfs_batcher_plan(fs->b)->t[n->tensor].dtype, tg->ndim,
				       tg->shape);
			memcpy(buf, r->hdr + pos, k);
		}
	}
	if (n->type == BFS_V_NPY && end > hlen) {
		uint64_t a = pos > hlen ? pos : hlen;
		rc = view_tensor_bytes(fs, vr->v, n->rank, n->epoch, (size_t)n->tensor, a - hlen,
				       end - hlen, buf + (a - pos));
	} else if (n->type == BFS_V_SAFETENSORS) {
		/* the tensors lie end to end after the header, in plan order */
		for (size_t t = 0; t < g->ntensors && !rc; t++) {
			uint64_t ts = g->g[t].offset, te = ts + g->g[t].nbytes;
			uint64_t a = pos > ts ? pos : ts, b = end < te ? end : te;
			if (a < b)
				rc = view_tensor_bytes(fs, vr->v, n->rank, n->epoch, t, a - ts,
						       b - ts, buf + (a - pos));
		}
	}
	rows = rc ? 0 : bfs_stats_rows(g, hlen, pos, end);
	bfs_views_put(fs->views, vr);
	if (rc)
		return read_failed(fs, rc);
	bfs_stats_read(&fs->reads, end - pos, rows); /* before the reply, as above */
	r->v.buf[0].mem = buf;
	r->v.buf[0].size = end - pos;
	return 0;
}

/* A read of batch-B.cuda: its JSON once the copy is complete. */
static int read_cuda_file(struct bfs_fs *fs, struct cfh *h, size_t size, off_t off,
			  struct read_reply *r)
{
	char err[400];

	if (!h)
		return -EIO;
	__atomic_add_fetch(&h->refs, 1, __ATOMIC_ACQ_REL);
	r->cuda = h;
	pthread_mutex_lock(&h->m);
	if (!h->waited) {
		h->err = bfs_cudapath_wait(fs->cuda, h->slot, err, sizeof(err));
		h->waited = true;
		if (h->err)
			cuda_fail(fs, "read", h->e->epoch, h->e->batch, err);
	}
	pthread_mutex_unlock(&h->m);
	if (h->err)
		return read_failed(fs, h->err);
	read_slice(r, h->json, h->len, off, size);
	return 0;
}

static int do_read(struct bfs_fs *fs, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi, struct read_reply *r)
{
	struct bfs_vnode n;
	int rc = bfs_vfs_get(fs->vfs, ino, &n);

	if (rc)
		return rc;
	switch (n.type) {
	case BFS_V_README:
		read_slice(r, fs->readme, fs->readme_len, off, size);
		return 0;
	case BFS_V_SCHEMA:
		read_slice(r, fs->schema_json, fs->schema_len, off, size);
		return 0;
	case BFS_V_STATS:
	case BFS_V_ERRORS:
		r->snap = (struct bfs_snapshot *)(uintptr_t)fi->fh;
		if (r->snap) /* opened with an OPEN request: its own snapshot */
			bfs_snapshot_get(r->snap);
		else
			r->snap = bfs_snapshot_current(fs->dyn, dyn_file(&n));
		if (!r->snap)
			return -ENOMEM;
		read_slice(r, r->snap->text, r->snap->len, off, size);
		return 0;
	case BFS_V_SAFETENSORS:
	case BFS_V_NPY:
		if (n.all)
			return read_view_file(fs, &n, size, off, r);
		return read_batch_file(fs, &n, size, off, r);
	case BFS_V_CUDA:
		return read_cuda_file(fs, (struct cfh *)(uintptr_t)fi->fh, size, off, r);
	default:
		return -EISDIR;
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct bfs_fs *fs = FS(req);
	struct read_reply r;
	int rc;

	read_reply_init(&r);
	rc = do_read(fs, ino, size, off, fi, &r);
	if (rc)
		fuse_reply_err(req, -rc);
	else if (r.splice)
		fuse_reply_data(req, &r.v, FUSE_BUF_SPLICE_MOVE);
	else
		fuse_reply_buf(req, r.v.buf[0].mem, r.v.buf[0].size);
	/* what the reply borrowed is released once it is written */
	read_done(fs, &r);
}

/* ------------------------------------------------------------ the rest */

static int do_statfs(struct statvfs *sv)
{
	memset(sv, 0, sizeof(*sv));
	sv->f_bsize = READ_CHUNK;
	sv->f_frsize = 512;
	sv->f_namemax = 255;
	sv->f_flag = ST_RDONLY;
	return 0;
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	int rc = do_statfs(&sv);

	(void)ino;
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_statfs(req, &sv);
}

/* Every change to the tree is refused: the mount is read-only. */
static void op_rofs_entry(fuse_req_t req)
{
	fuse_reply_err(req, EROFS);
}

static void op_mknod(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, dev_t d)
{
	(void)p, (void)n, (void)m, (void)d;
	op_rofs_entry(req);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m)
{
	(void)p, (void)n, (void)m;
	op_rofs_entry(req);
}

static void op_unlink(fuse_req_t req, fuse_ino_t p, const char *n)
{
	(void)p, (void)n;
	op_rofs_entry(req);
}

static void op_symlink(fuse_req_t req, const char *l, fuse_ino_t p, const char *n)
{
	(void)l, (void)p, (void)n;
	op_rofs_entry(req);
}

static void op_rename(fuse_req_t req, fuse_ino_t p, const char *n, fuse_ino_t np, const char *nn,
		      unsigned int f)
{
	(void)p, (void)n, (void)np, (void)nn, (void)f;
	op_rofs_entry(req);
}

static void op_link(fuse_req_t req, fuse_ino_t i, fuse_ino_t np, const char *nn)
{
	(void)i, (void)np, (void)nn;
	op_rofs_entry(req);
}

static void op_setattr(fuse_req_t req, fuse_ino_t i, struct stat *a, int s,
		       struct fuse_file_info *fi)
{
	(void)i, (void)a, (void)s, (void)fi;
	op_rofs_entry(req);
}

static void op_create(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m,
		      struct fuse_file_info *fi)
{
	(void)p, (void)n, (void)m, (void)fi;
	op_rofs_entry(req);
}

static void op_write(fuse_req_t req, fuse_ino_t i, const char *b, size_t s, off_t o,
		     struct fuse_file_info *fi)
{
	(void)i, (void)b, (void)s, (void)o, (void)fi;
	op_rofs_entry(req);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t i, const char *n, const char *v, size_t s, int f)
{
	(void)i, (void)n, (void)v, (void)s, (void)f;
	op_rofs_entry(req);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t i, const char *n)
{
	(void)i, (void)n;
	op_rofs_entry(req);
}

static const struct fuse_lowlevel_ops ops_ll = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.open = op_open,
	.release = op_release,
	.read = op_read,
	.statfs = op_statfs,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_unlink,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.setattr = op_setattr,
	.create = op_create,
	.write = op_write,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
};

/* ------------------------------------------------------------ lifecycle */

void bfs_fs_free(struct bfs_fs *fs)
{
	if (!fs)
		return;
	/* builds waiting on the source end first, then the cache's workers */
	bfs_iostage_stop(fs->io);
	bfs_cache_free(fs->cache);
	bfs_iostage_free(fs->io);
	bfs_cudapath_free(fs->cuda);
	bfs_cudapool_free(fs->cpool);
	bfs_views_free(fs->views);
	bfs_stash_free(fs->stash);
	bfs_snapshot_set_free(fs->dyn);
	bfs_vfs_free(fs->vfs);
	bfs_geom_free(fs->geom_full);
	bfs_geom_free(fs->geom_last);
	free(fs->readme);
	free(fs->schema_json);
	free(fs->options_text);
	bfs_errlog_free(fs->errlog);
	bfs_stats_reads_destroy(&fs->reads);
	free(fs);
}

int bfs_fs_new(struct bfs_fs **out, const struct bfs_fs_config *cfg)
{
	struct bfs_fs *fs = calloc(1, sizeof(*fs));
	const struct bfs_plan *plan = bfs_batcher_plan(cfg->batcher);
	uint64_t nb = bfs_batcher_nbatches(cfg->batcher);
	int rc;

	if (!fs)
		return -ENOMEM;
	bfs_stats_reads_init(&fs->reads);
	fs->cfg = *cfg;
	if (getenv("BATCHFS_OPEN_REQUESTS") && strcmp(getenv("BATCHFS_OPEN_REQUESTS"), "1") == 0)
		fs->cfg.keep_open = true;
	fs->ds = cfg->ds;
	fs->b = cfg->batcher;
	fs->rb = cfg->nranks ? cfg->ranks : &fs->b;
	fs->nranks = cfg->nranks ? cfg->nranks : 1;
	fs->mount_time = time(NULL);
	fs->uid = getuid();
	fs->gid = getgid();
	fs->readme = strdup(cfg->readme ? cfg->readme : "");
	fs->schema_json = strdup(cfg->schema_json ? cfg->schema_json : "{}\n");
	fs->options_text = strdup(cfg->options_text ? cfg->options_text : "");
	if (!fs->readme || !fs->schema_json || !fs->options_text ||
	    bfs_errlog_new(&fs->errlog, BFS_ERRLOG_MAX_LINES, stderr) != 0 ||
	    bfs_snapshot_set_new(&fs->dyn, 2, dyn_text, fs) != 0) {
		rc = -ENOMEM;
		goto fail;
	}
	fs->readme_len = strlen(fs->readme);
	fs->schema_len = strlen(fs->schema_json);
	if (cfg->cuda_device >= 0) {
		/* only dlopen here: CUDA itself starts in the detached daemon
		 * (bfs_fs_run). The descriptors need OPEN and RELEASE requests. */
		char err[400];
		unsigned pool = cfg->cuda_pool ? cfg->cuda_pool : BFS_CUDA_POOL_DEFAULT;
		if (bfs_cudapath_load(&fs->cuda, cfg->cuda_device, pool, err, sizeof(err)) != 0) {
			rc = bfs_err_set(-EINVAL, "option 'cuda': %s", err);
			goto fail;
		}
		rc = bfs_cudapool_new(&fs->cpool, bfs_cudapath_pool(fs->cuda));
		if (rc)
			goto fail;
		fs->cfg.keep_open = true;
	}
	rc = bfs_vfs_new(&fs->vfs, plan, nb, cfg->epochs, cfg->cuda_device >= 0, cfg->nranks);
	if (!rc)
		rc = bfs_views_new(&fs->views, fs->rb, fs->nranks, NVIEWS);
	if (rc)
		goto fail;
	if (plan->nslots == 0 && nb > 0) {
		rc = bfs_batcher_geom(&fs->geom_full, fs->b, 0, 0);
		if (!rc)
			rc = bfs_batcher_geom(&fs->geom_last, fs->b, 0, nb - 1);
		if (rc)
			goto fail;
	}
	/* a sixteenth of cache_size for all/'s small tensors, out of the cache's
	 * budget: the daemon stays within cache_size (docs/contract.md) */
	rc = bfs_stash_new(&fs->stash, cfg->cache_size / 16);
	if (!rc)
		rc = bfs_cache_new(&fs->cache, fs->rb, fs->nranks,
				   cfg->cache_size - cfg->cache_size / 16, cfg->threads,
				   cfg->prefetch, bfs_fs_report, fs);
	if (rc)
		goto fail;
	bfs_cache_set_epochs(fs->cache, cfg->epochs);
	if (fs->cuda)
		bfs_cache_set_pinning(fs->cache, bfs_cudapath_pin, bfs_cudapath_unpin, fs->cuda);
	*out = fs;
	return 0;
fail:
	bfs_fs_free(fs);
	return rc;
}

/* The CUDA runtime starts in the detached daemon: a CUDA context does not
 * survive a fork (bfs_lifecycle_daemonize). */
static int cuda_runtime_start(void *arg, char *msg, size_t cap)
{
	struct bfs_fs *fs = arg;
	char err[480];

	if (bfs_cudapath_init(fs->cuda, err, sizeof(err)) == 0)
		return 0;
	snprintf(msg, cap, "option 'cuda': %s", err);
	return -1;
}

static void session_unmount(void *arg)
{
	struct bfs_fs *fs = arg;

	fuse_session_unmount(fs->se);
}

/* A stopping signal (lifecycle.h): the session ends, and reads waiting on
 * the source give up, so that FUSE threads stuck on a hung source finish
 * and the loop returns. */
static void session_stop(void *arg)
{
	struct bfs_fs *fs = arg;

	fuse_session_exit(fs->se);
	bfs_iostage_stop(fs->io);
}

static bool session_ended(void *arg)
{
	struct bfs_fs *fs = arg;

	return fuse_session_exited(fs->se);
}

/* The kernel ended the session (an unmount): as a signal does, the I/O
 * stage stops, so that the loop can return. */
static void source_stop(void *arg)
{
	struct bfs_fs *fs = arg;

	bfs_iostage_stop(fs->io);
}

/* A line from the I/O stage or the disk cache: to the log. */
static void io_note(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "batchfs: %s\n", msg);
}

/* The I/O stage, when the mount has one. Its backend is chosen per source
 * (fetch.h, BFS_FETCH_AUTO); BATCHFS_IO_BACKEND=threads or io_uring
 * overrides the choice, for measurements (docs/architecture.md): stats.json
 * then says "asked for". */
static void start_io(struct bfs_fs *fs)
{
	struct bfs_iostage_opts o = {
		.depth = fs->cfg.io_depth,
		.readahead = fs->cfg.readahead,
		.all = fs->cfg.io_all,
		.lookahead = fs->cfg.prefetch,
		.epochs = fs->cfg.epochs,
		.backend = BFS_FETCH_AUTO,
		.disk_cache = fs->cfg.disk_cache,
		.disk_cache_size = fs->cfg.disk_cache_size,
		.note = io_note,
	};
	const char *e = getenv("BATCHFS_IO_BACKEND");

	if (!fs->cfg.io_depth)
		return;
	if (e && strcmp(e, "threads") == 0)
		o.backend = BFS_FETCH_THREADS;
	else if (e && strcmp(e, "io_uring") == 0)
		o.backend = BFS_FETCH_URING;
	if (bfs_iostage_new(&fs->io, fs->ds, fs->rb, fs->nranks, &o) != 0) {
		fprintf(stderr,
			"batchfs: the I/O stage did not start (%s); reading the source "
			"from the decoders\n",
			bfs_err_msg());
		return;
	}
	bfs_cache_set_io(fs->cache, bfs_iostage_plan(fs->io));
}

int bfs_fs_run(struct bfs_fs *fs, int argc, char **argv, const char *mountpoint, bool foreground)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *lc = NULL;
	struct bfs_lifecycle *life = NULL;
	struct bfs_lifecycle_ops ops = {
		.stop = session_stop,
		.on_end = source_stop,
		.ctx = fs,
	};
	int ret = 1;

	bfs_lifecycle_signals();
	for (int i = 0; i < argc; i++)
		if (fuse_opt_add_arg(&args, argv[i]) != 0)
			goto out;
	fs->se = fuse_session_new(&args, &ops_ll, sizeof(ops_ll), fs);
	if (!fs->se) {
		fprintf(stderr, "batchfs: could not create the FUSE session (bad FUSE option?)\n");
		goto out;
	}
	if (fuse_session_mount(fs->se, mountpoint) != 0) {
		fprintf(stderr, "batchfs: %s: could not mount\n", mountpoint);
		goto out_session;
	}
	(void)bfs_lifecycle_readahead(mountpoint, READ_CHUNK >> 10); /* best effort */
	/* mounted: a batchfs started on the folder from now on finds the
	 * mount (or, once unmounted, a daemon that is only exiting) */
	if (fs->cfg.mount_lock)
		(void)bfs_lifecycle_lock_mounted(fs->cfg.mount_lock_fd);
	/* detach only now that the mount is ready; threads start after fork */
	if (fs->cuda) {
		if (bfs_lifecycle_daemonize(foreground, cuda_runtime_start, session_unmount, fs,
					    "CUDA") != 0)
			goto out_unmount;
	} else if (fuse_daemonize(foreground) != 0) {
		goto out_unmount;
	}
	/* a detached daemon is a new process: its own watch (main.c started
	 * the foreground's) */
	if (!foreground && fs->cfg.watch && bfs_lifecycle_watch(fs->cfg.watch_fd) != 0)
		goto out_unmount;
	/* the stage first: the signal thread reads fs->io (a signal that
	 * comes meanwhile waits, blocked, and is taken once it starts) */
	start_io(fs);
	/* with the I/O stage, an unmount must stop it too (session_ended) */
	ops.ended = fs->io ? session_ended : NULL;
	if (bfs_lifecycle_new(&life, &ops) != 0) {
		fprintf(stderr, "batchfs: could not start the signal thread\n");
		goto out_unmount;
	}
	if (bfs_cache_start(fs->cache) != 0)
		fprintf(stderr, "batchfs: prefetch workers did not start; decoding on demand\n");
	lc = fuse_loop_cfg_create();
	if (!lc)
		goto out_unmount;
	fuse_loop_cfg_set_max_threads(lc, fs->cfg.fuse_threads ? fs->cfg.fuse_threads : 16);
	fuse_loop_cfg_set_clone_fd(lc, 0);
	if (foreground && fs->cfg.ready)
		fprintf(stderr, "%s\n", fs->cfg.ready);
	/* a signal ends the loop too: that is a clean unmount */
	fuse_session_loop_mt(fs->se, lc);
	ret = 0;
	fuse_loop_cfg_destroy(lc);
out_unmount:
	bfs_lifecycle_free(life);
	fuse_session_unmount(fs->se);
	/* the folder is free for a re-mount now, however long the rest of
	 * the exit takes (bfs_fs_free) */
	if (fs->cfg.mount_lock)
		bfs_lifecycle_lock_release(fs->cfg.mount_lock_fd);
out_session:
	fuse_session_destroy(fs->se);
	fs->se = NULL;
out:
	fuse_opt_free_args(&args);
	/* the stopping signals stay blocked (and the wake handler in place):
	 * a second Ctrl-C while the mount winds down must not turn a clean
	 * exit into death by signal */
	return ret;
}

int bfs_fs_check_args(int argc, char **argv)
{
	static const struct fuse_lowlevel_ops none;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se;

	for (int i = 0; i < argc; i++)
		if (fuse_opt_add_arg(&args, argv[i]) != 0) {
			fuse_opt_free_args(&args);
			return 1;
		}
	se = fuse_session_new(&args, &none, sizeof(none), NULL);
	fuse_opt_free_args(&args);
	if (!se)
		return 1;
	fuse_session_destroy(se);
	return 0;
}
