/*
 * fuse_ops.c — FUSE low-level handlers and the session lifecycle
 * (see fuse_ops.h). The only file that includes <fuse_lowlevel.h>.
 */
#define FUSE_USE_VERSION 312

#include "fuse_ops.h"

#include "cache.h"
#include "epoch.h"
#include "vfs.h"

#include <fuse_lowlevel.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Files are immutable for the life of the mount: cache names and
 * attributes for a long time. */
#define LONG_TIMEOUT 86400.0
#define MAX_ERROR_LINES 10000
#define READ_CHUNK (1u << 20)
#define NVIEWS 8 /* epoch views kept (geometry and chunk totals of all/) */

/* A shared epoch view; the last reference frees it. */
struct vref {
	struct bfs_epoch_view *v;
	int refs;
};

struct bfs_fs {
	const struct bfs_dataset *ds;
	const struct bfs_batcher *b;
	struct bfs_cache *cache;
	struct bfs_vfs *vfs;
	struct bfs_fs_config cfg;
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
	pthread_mutex_t dlock; /* guards dyn and dyn_gen */
	struct fh *dyn[2];     /* latest snapshots of stats.json, errors.txt */
	uint64_t dyn_gen;      /* bumped per snapshot: their mtime, in ns */

	pthread_mutex_t vlock; /* guards views and view_tick */
	struct {
		uint64_t epoch, used;
		struct vref *r;
	} views[NVIEWS];
	uint64_t view_tick;

	pthread_mutex_t elock; /* guards everything below */
	char *errors;          /* errors.txt */
	size_t errors_len, errors_cap, error_lines;
	uint64_t *error_hashes; /* [MAX_ERROR_LINES], for de-duplication */
	uint64_t corrupt, skipped, failed_reads, dropped_lines;
	uint64_t reads, bytes_read;
	double records_served; /* rows' worth of tensor data read, see served_rows */
};

/* ------------------------------------------------------------- errors */

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

void bfs_fs_report(void *arg, const char *msg, bool skipped)
{
	struct bfs_fs *fs = arg;
	uint64_t h = hash_str(msg);
	size_t len = strlen(msg);
	bool seen = false;

	pthread_mutex_lock(&fs->elock);
	for (size_t i = 0; i < fs->error_lines; i++)
		if (fs->error_hashes[i] == h) {
			seen = true;
			break;
		}
	if (!seen) {
		fs->corrupt++;
		if (skipped)
			fs->skipped++;
		if (fs->error_lines < MAX_ERROR_LINES) {
			size_t need = fs->errors_len + len + 32;
			if (need > fs->errors_cap) {
				size_t nc = fs->errors_cap ? fs->errors_cap * 2 : 4096;
				while (nc < need)
					nc *= 2;
				char *n = realloc(fs->errors, nc);
				if (n) {
					fs->errors = n;
					fs->errors_cap = nc;
				}
			}
			if (need <= fs->errors_cap) {
				fs->errors_len += (size_t)snprintf(fs->errors + fs->errors_len,
								   fs->errors_cap - fs->errors_len,
								   "%s%s\n", msg,
								   skipped ? " (skipped)" : "");
				fs->error_hashes[fs->error_lines++] = h;
			}
		} else {
			fs->dropped_lines++;
		}
		fprintf(stderr, "batchfs: %s%s\n", msg, skipped ? " (skipped)" : "");
	}
	pthread_mutex_unlock(&fs->elock);
}

/* ------------------------------------------------------------ dynamic */

static char *stats_text(struct bfs_fs *fs, size_t *len)
{
	struct bfs_cache_stats st;
	char *s = NULL;
	int n;

	bfs_cache_stats(fs->cache, &st);
	pthread_mutex_lock(&fs->elock);
	n = asprintf(&s,
		     "{\n"
		     "  \"records\": %" PRIu64 ",\n"
		     "  \"batches_per_epoch\": %" PRIu64 ",\n"
		     "  \"index_reused\": %s,\n"
		     "  \"schema_reused\": %s,\n"
		     "  \"index_bytes\": %" PRIu64 ",\n"
		     "  \"index_corrupt_records\": %" PRIu64 ",\n"
		     "  \"reads\": %" PRIu64 ",\n"
		     "  \"bytes_read\": %" PRIu64 ",\n"
		     "  \"cache_hits\": %" PRIu64 ",\n"
		     "  \"cache_misses\": %" PRIu64 ",\n"
		     "  \"cache_waits\": %" PRIu64 ",\n"
		     "  \"cache_evictions\": %" PRIu64 ",\n"
		     "  \"cache_entries\": %" PRIu64 ",\n"
		     "  \"cache_bytes\": %" PRIu64 ",\n"
		     "  \"cache_peak_bytes\": %" PRIu64 ",\n"
		     "  \"cache_budget\": %" PRIu64 ",\n"
		     "  \"prefetch_issued\": %" PRIu64 ",\n"
		     "  \"batches_decoded\": %" PRIu64 ",\n"
		     "  \"chunks_decoded\": %" PRIu64 ",\n"
		     "  \"decode_seconds\": %.6f,\n"
		     "  \"decode_errors\": %" PRIu64 ",\n"
		     "  \"corrupt_records\": %" PRIu64 ",\n"
		     "  \"skipped_records\": %" PRIu64 ",\n"
		     "  \"failed_reads\": %" PRIu64 ",\n"
		     "  \"records_served\": %" PRIu64 ",\n"
		     "  \"records_decoded\": %" PRIu64 ",\n"
		     "  \"prefetch_ready\": %" PRIu64 ",\n"
		     "  \"prefetch_queued\": %" PRIu64 ",\n"
		     "  \"decoding\": %" PRIu64 ",\n"
		     "  \"uptime_seconds\": %lld\n"
		     "}\n",
		     bfs_dataset_nrecords(fs->ds), bfs_batcher_nbatches(fs->b),
		     bfs_dataset_index_reused(fs->ds) ? "true" : "false",
		     bfs_dataset_schema_reused(fs->ds) ? "true" : "false",
		     bfs_dataset_index_bytes(fs->ds), bfs_dataset_bad_records(fs->ds), fs->reads, fs->bytes_read, st.hits, st.misses,
		     st.prefetch_hits, st.evictions, st.entries, st.bytes, st.peak_bytes, st.budget,
		     st.prefetch_issued, st.batches_decoded, st.chunks_decoded,
		     (double)st.decode_ns / 1e9,
		     st.decode_errors, fs->corrupt, fs->skipped, fs->failed_reads,
		     (uint64_t)(fs->records_served + 0.5), st.records_decoded, st.prefetch_ready,
		     st.prefetch_queued, st.decoding,
		     (long long)(time(NULL) - fs->mount_time));
	pthread_mutex_unlock(&fs->elock);
	if (n < 0)
		return NULL;
	*len = (size_t)n;
	return s;
}

static char *errors_text(struct bfs_fs *fs, size_t *len)
{
	char *s;

	pthread_mutex_lock(&fs->elock);
	s = malloc(fs->errors_len + 64);
	if (s) {
		memcpy(s, fs->errors ? fs->errors : "", fs->errors_len);
		*len = fs->errors_len;
		if (fs->dropped_lines)
			*len += (size_t)snprintf(s + *len, 64, "... %" PRIu64 " more\n",
						 fs->dropped_lines);
	}
	pthread_mutex_unlock(&fs->elock);
	return s;
}

/* -------------------------------------------------------- epoch views */

static void vref_put(struct bfs_fs *fs, struct vref *r)
{
	bool last;

	if (!r)
		return;
	pthread_mutex_lock(&fs->vlock);
	last = --r->refs == 0;
	pthread_mutex_unlock(&fs->vlock);
	if (last) {
		bfs_epoch_view_free(r->v);
		free(r);
	}
}

/* The view of `epoch` (a reference: vref_put it). Computing one costs a
 * pass over the epoch's permutation when a tensor is ragged; without
 * ragged tensors every epoch has the same view, kept once. */
static int vref_get(struct bfs_fs *fs, uint64_t epoch, struct vref **out)
{
	uint64_t key = bfs_batcher_plan(fs->b)->nslots ? epoch : 0;
	struct vref *r = NULL, *drop = NULL;
	size_t lru = 0;
	int rc;

	pthread_mutex_lock(&fs->vlock);
	for (size_t i = 0; i < NVIEWS; i++)
		if (fs->views[i].r && fs->views[i].epoch == key) {
			r = fs->views[i].r;
			r->refs++;
			fs->views[i].used = ++fs->view_tick;
			break;
		}
	pthread_mutex_unlock(&fs->vlock);
	if (r) {
		*out = r;
		return 0;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	rc = bfs_epoch_view_new(&r->v, fs->b, key);
	if (rc) {
		free(r);
		return rc;
	}
	r->refs = 2; /* the caller's and the table's */
	pthread_mutex_lock(&fs->vlock);
	for (size_t i = 0; i < NVIEWS; i++) {
		if (fs->views[i].r && fs->views[i].epoch == key) { /* made meanwhile */
			r->refs = 0;
			drop = r;
			r = fs->views[i].r;
			r->refs++;
			goto done;
		}
		if (!fs->views[i].r || fs->views[i].used < fs->views[lru].used)
			lru = i;
		if (!fs->views[i].r)
			break;
	}
	if (fs->views[lru].r && --fs->views[lru].r->refs == 0)
		drop = fs->views[lru].r;
	fs->views[lru].r = r;
	fs->views[lru].epoch = key;
	fs->views[lru].used = ++fs->view_tick;
done:
	pthread_mutex_unlock(&fs->vlock);
	if (drop) {
		bfs_epoch_view_free(drop->v);
		free(drop);
	}
	*out = r;
	return 0;
}

struct fh {
	char *text; /* snapshot of a dynamic file */
	size_t len;
	int refs;   /* the open file's, plus one per read being replied to */
};

/* Drop a reference to a snapshot; the last one frees it. A read holds one
 * across its reply: once the kernel has the reply the reader may close the
 * file, and the release may then run before the read handler returns. */
static void fh_put(struct fh *h)
{
	if (h && __atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		free(h->text);
		free(h);
	}
}

/* stats.json is padded with spaces to this size, so that its size does not
 * change as its numbers grow: a reader that saw one snapshot's size and
 * reads the next still gets whole JSON. */
#define STATS_SIZE 4096

/* A new snapshot of stats.json or errors.txt, made the current one; the
 * caller gets a reference. Without OPEN requests (no_open) a dynamic file
 * is read through the page cache: every GETATTR makes a snapshot with a new
 * mtime, and the kernel (auto_inval_data, attributes never cached) drops
 * the cached pages when the mtime moves, so each read(2) sees fresh
 * counters. errors.txt only grows, so an older size is a prefix of it. */
static struct fh *dyn_refresh(struct bfs_fs *fs, enum bfs_vtype type, uint64_t *gen)
{
	struct fh *h = calloc(1, sizeof(*h)), *old;
	int k = type == BFS_V_STATS ? 0 : 1;

	if (!h)
		return NULL;
	h->text = k == 0 ? stats_text(fs, &h->len) : errors_text(fs, &h->len);
	if (h->text && k == 0 && h->len < STATS_SIZE) {
		char *t = realloc(h->text, STATS_SIZE);
		if (t) {
			memset(t + h->len - 1, ' ', STATS_SIZE - h->len);
			t[STATS_SIZE - 1] = '\n';
			h->text = t;
			h->len = STATS_SIZE;
		}
	}
	if (!h->text) {
		free(h);
		return NULL;
	}
	h->refs = 2; /* the table's and the caller's */
	pthread_mutex_lock(&fs->dlock);
	old = fs->dyn[k];
	fs->dyn[k] = h;
	*gen = ++fs->dyn_gen;
	pthread_mutex_unlock(&fs->dlock);
	fh_put(old);
	return h;
}

/* The current snapshot (a reference), made if there is none. */
static struct fh *dyn_current(struct bfs_fs *fs, enum bfs_vtype type)
{
	int k = type == BFS_V_STATS ? 0 : 1;
	struct fh *h;
	uint64_t gen;

	pthread_mutex_lock(&fs->dlock);
	h = fs->dyn[k];
	if (h)
		__atomic_add_fetch(&h->refs, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_unlock(&fs->dlock);
	return h ? h : dyn_refresh(fs, type, &gen);
}

/* -------------------------------------------------------------- sizes */

/* Geometry of (epoch, batch): borrowed from the fixed ones, or computed
 * (*owned set: free it). */
static int get_geom(struct bfs_fs *fs, uint64_t e, uint64_t b, struct bfs_geom **g, bool *owned)
{
	*owned = false;
	if (fs->geom_full) {
		*g = (b + 1 == bfs_batcher_nbatches(fs->b)) ? fs->geom_last : fs->geom_full;
		return 0;
	}
	*owned = true;
	return bfs_batcher_geom(g, fs->b, e, b);
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
		struct fh *h = dyn_refresh(fs, n->type, &gen);
		if (!h)
			return -ENOMEM;
		*size = h->len;
		fh_put(h);
		if (mtime_ns)
			*mtime_ns = gen;
		return 0;
	}
	case BFS_V_SAFETENSORS:
	case BFS_V_NPY:
		if (n->all) {
			struct vref *r;
			rc = vref_get(fs, n->epoch, &r);
			if (rc)
				return rc;
			g = r->v->geom;
			*size = n->type == BFS_V_SAFETENSORS ? g->st_size
							     : bfs_npy_size(&g->g[n->tensor]);
			vref_put(fs, r);
			return 0;
		}
		rc = get_geom(fs, n->epoch, n->batch, &g, &owned);
		if (rc)
			return rc;
		*size = n->type == BFS_V_SAFETENSORS ? g->st_size : bfs_npy_size(&g->g[n->tensor]);
		if (owned)
			bfs_geom_free(g);
		return 0;
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

/* ------------------------------------------------------------ handlers */

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
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	conn->want &= ~(unsigned)FUSE_CAP_ASYNC_READ;
	conn->want |= conn->capable & FUSE_CAP_ASYNC_READ;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct bfs_fs *fs = FS(req);
	struct fuse_entry_param e;
	struct bfs_vnode dir, n;
	int rc = bfs_vfs_get(fs->vfs, parent, &dir);

	if (!rc)
		rc = bfs_vfs_lookup(fs->vfs, &dir, name, &n);
	memset(&e, 0, sizeof(e));
	if (!rc)
		rc = fill_attr(fs, &n, &e.attr);
	if (rc) {
		if (rc == -ENOENT) { /* cache the negative answer too: names never appear */
			e.ino = 0;
			e.entry_timeout = LONG_TIMEOUT;
			fuse_reply_entry(req, &e);
			return;
		}
		fuse_reply_err(req, -rc);
		return;
	}
	e.ino = n.ino;
	e.generation = 1;
	e.attr_timeout = is_dynamic(&n) ? 0 : LONG_TIMEOUT;
	e.entry_timeout = LONG_TIMEOUT;
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct bfs_fs *fs = FS(req);
	struct bfs_vnode n;
	struct stat st;
	int rc = bfs_vfs_get(fs->vfs, ino, &n);

	(void)fi;
	if (!rc)
		rc = fill_attr(fs, &n, &st);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fuse_reply_attr(req, &st, is_dynamic(&n) ? 0 : LONG_TIMEOUT);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct bfs_fs *fs = FS(req);
	struct bfs_vnode n;
	int rc = bfs_vfs_get(fs->vfs, ino, &n);

	if (!rc && !bfs_vnode_is_dir(&n))
		rc = -ENOTDIR;
	if (!rc && fs->no_opendir)
		rc = -ENOSYS; /* the kernel then caches listings itself (FOPEN_CACHE_DIR) */
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct bfs_fs *fs = FS(req);
	struct bfs_vnode dir, n;
	char *buf;
	size_t used = 0;
	int rc = bfs_vfs_get(fs->vfs, ino, &dir);

	(void)fi;
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* offsets: 0 ".", 1 "..", 2+i child i */
	for (uint64_t i = (uint64_t)off;; i++) {
		char name[512];
		struct stat st;
		size_t ent;

		memset(&st, 0, sizeof(st));
		if (i == 0) {
			strcpy(name, ".");
			st.st_ino = dir.ino;
			st.st_mode = S_IFDIR;
		} else if (i == 1) {
			strcpy(name, "..");
			st.st_ino = bfs_vfs_parent(fs->vfs, &dir);
			st.st_mode = S_IFDIR;
		} else {
			if (bfs_vfs_child(fs->vfs, &dir, i - 2, &n, name, sizeof(name)) != 0)
				break;
			st.st_ino = n.ino;
			st.st_mode = bfs_vnode_is_dir(&n) ? S_IFDIR : S_IFREG;
		}
		ent = fuse_add_direntry(req, buf + used, size - used, name, &st, (off_t)(i + 1));
		if (ent > size - used)
			break;
		used += ent;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct bfs_fs *fs = FS(req);
	struct bfs_vnode n;
	int rc = bfs_vfs_get(fs->vfs, ino, &n);

	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (bfs_vnode_is_dir(&n)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (fs->no_open) { /* the kernel opens every file without asking from now on */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (is_dynamic(&n)) {
		struct fh *h = calloc(1, sizeof(*h));
		if (h)
			h->text = n.type == BFS_V_STATS ? stats_text(fs, &h->len)
							: errors_text(fs, &h->len);
		if (!h || !h->text) {
			free(h);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		h->refs = 1;
		fi->fh = (uint64_t)(uintptr_t)h;
		fi->direct_io = 1;
	} else {
		fi->keep_cache = 1;
	}
	fuse_reply_open(req, fi);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fh *h = (struct fh *)(uintptr_t)fi->fh;

	(void)ino;
	fh_put(h);
	fuse_reply_err(req, 0);
}

static void reply_slice(fuse_req_t req, const char *data, size_t len, off_t off, size_t size)
{
	if ((uint64_t)off >= len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > len - (size_t)off)
		size = len - (size_t)off;
	fuse_reply_buf(req, data + off, size);
}

/* The records' worth of tensor data in bytes [pos, end) of a file whose
 * data (after hlen bytes of header) is part of a unit (batch, or epoch
 * view) of geometry g: the bytes of tensor data read, over the unit's bytes
 * of tensor data per record. So reading every .npy of a batch, or its
 * .safetensors, counts its records once; a header counts nothing. */
static double served_rows(const struct bfs_geom *g, uint64_t hlen, uint64_t pos, uint64_t end)
{
	uint64_t total = g->st_size - g->st_hlen;
	uint64_t a = pos > hlen ? pos : hlen;

	if (end <= a || total == 0)
		return 0;
	return (double)(end - a) * (double)g->batch / (double)total;
}

/* A read of a batch or view file answered: its bytes and the counters. */
static void count_read(struct bfs_fs *fs, uint64_t bytes, double records)
{
	pthread_mutex_lock(&fs->elock);
	fs->reads++;
	fs->bytes_read += bytes;
	fs->records_served += records;
	pthread_mutex_unlock(&fs->elock);
}

/* A read of a batch or view file failed (rc < 0): EIO, or ENOMEM. */
static void fail_read(struct bfs_fs *fs, fuse_req_t req, int rc)
{
	pthread_mutex_lock(&fs->elock);
	fs->failed_reads++;
	pthread_mutex_unlock(&fs->elock);
	fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
}

/* A bufvec of up to two memory pieces (npy header + data). */
struct bufvec2 {
	struct fuse_bufvec v;
	struct fuse_buf extra;
};

static void read_batch_file(struct bfs_fs *fs, fuse_req_t req, const struct bfs_vnode *n,
			    size_t size, off_t off)
{
	struct bfs_cache_entry *e = NULL;
	struct bufvec2 bv;
	char hdr[1024];
	const struct bfs_tensor_geom *g;
	uint64_t fsize, hlen, rows_hlen, pos = (uint64_t)off;
	const uint8_t *data;
	double rows;
	int rc;

	rc = bfs_cache_get(&e, fs->cache, n->epoch, n->batch);
	if (rc) {
		fail_read(fs, req, rc);
		return;
	}
	memset(&bv, 0, sizeof(bv));
	bv.v.count = 0;
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
	if (pos >= fsize) {
		bfs_cache_put(fs->cache, e);
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > fsize - pos)
		size = (size_t)(fsize - pos);
	rows = served_rows(e->geom, rows_hlen, pos, pos + size);
	struct fuse_buf *b = bv.v.buf;
	size_t left = size;
	if (pos < hlen) {
		size_t k = (size_t)(hlen - pos) < left ? (size_t)(hlen - pos) : left;
		bfs_npy_header(hdr, sizeof(hdr), bfs_batcher_plan(fs->b)->t[n->tensor].dtype,
			       g->ndim, g->shape);
		b->mem = hdr + pos;
		b->size = k;
		bv.v.count++;
		b = &bv.extra;
		left -= k;
		pos = hlen;
	}
	if (left) {
		b->mem = (void *)(data + (pos - hlen));
		b->size = left;
		bv.v.count++;
	}
	/* counted before the reply: a reader that reads stats.json after its
	 * read returned sees the read in it */
	count_read(fs, size, rows);
	fuse_reply_data(req, &bv.v, FUSE_BUF_SPLICE_MOVE);
	bfs_cache_put(fs->cache, e);
}

/* Bytes [a, b) of tensor t's data in the epoch view, from the chunks that
 * hold them (decoded on demand, prefetched ahead). */
static int view_tensor_bytes(struct bfs_fs *fs, const struct bfs_epoch_view *v, uint64_t epoch,
			     size_t t, uint64_t a, uint64_t b, uint8_t *dst)
{
	if (v->nchunks == 0) { /* no rows: only offsets, all 0 */
		memset(dst, 0, b - a);
		return 0;
	}
	while (a < b) {
		uint64_t c = bfs_epoch_view_chunk(v, t, a), k;
		struct bfs_cache_entry *e = NULL;
		int rc = bfs_cache_get(&e, fs->cache, epoch, c | BFS_CHUNK);

		if (rc)
			return rc;
		k = bfs_epoch_view_copy(v, t, c, e->buf, e->geom, a, b - a, dst);
		bfs_cache_put(fs->cache, e);
		if (k == 0) {
			bfs_fs_report(fs, "all/: a chunk's sizes differ from the index (source changed?)",
				      false);
			return -EIO;
		}
		a += k;
		dst += k;
	}
	return 0;
}

/* A read of all/F.npy or all.safetensors: assembled from chunks into one
 * reply buffer (offsets must be shifted, so no zero-copy here). */
static void read_view_file(struct bfs_fs *fs, fuse_req_t req, const struct bfs_vnode *n,
			   size_t size, off_t off)
{
	uint64_t pos = (uint64_t)off, end, fsize, hlen;
	const struct bfs_geom *g;
	struct vref *r = NULL;
	uint8_t *buf = NULL;
	char hdr[1024];
	int rc = vref_get(fs, n->epoch, &r);

	if (rc)
		goto fail;
	g = r->v->geom;
	if (n->type == BFS_V_SAFETENSORS) {
		fsize = g->st_size;
		hlen = g->st_hlen;
	} else {
		fsize = bfs_npy_size(&g->g[n->tensor]);
		hlen = g->g[n->tensor].npy_hlen;
	}
	if (pos >= fsize) {
		vref_put(fs, r);
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	end = pos + size < fsize ? pos + size : fsize;
	buf = malloc(end - pos);
	if (!buf) {
		rc = -ENOMEM;
		goto fail;
	}
	if (pos < hlen) { /* the header */
		uint64_t k = (end < hlen ? end : hlen) - pos;
		if (n->type == BFS_V_SAFETENSORS) {
			memcpy(buf, g->st_header + pos, k);
		} else {
			const struct bfs_tensor_geom *tg = &g->g[n->tensor];
			bfs_npy_header(hdr, sizeof(hdr), bfs_batcher_plan(fs->b)->t[n->tensor].dtype,
				       tg->ndim, tg->shape);
			memcpy(buf, hdr + pos, k);
		}
	}
	if (n->type == BFS_V_NPY && end > hlen) {
		uint64_t a = pos > hlen ? pos : hlen;
		rc = view_tensor_bytes(fs, r->v, n->epoch, (size_t)n->tensor, a - hlen, end - hlen,
				       buf + (a - pos));
	} else if (n->type == BFS_V_SAFETENSORS) {
		/* the tensors lie end to end after the header, in plan order */
		for (size_t t = 0; t < g->ntensors && !rc; t++) {
			uint64_t ts = g->g[t].offset, te = ts + g->g[t].nbytes;
			uint64_t a = pos > ts ? pos : ts, b = end < te ? end : te;
			if (a < b)
				rc = view_tensor_bytes(fs, r->v, n->epoch, t, a - ts, b - ts,
						       buf + (a - pos));
		}
	}
	if (rc)
		goto fail;
	double rows = served_rows(g, hlen, pos, end);
	vref_put(fs, r);
	count_read(fs, end - pos, rows); /* before the reply, as above */
	fuse_reply_buf(req, (const char *)buf, end - pos);
	free(buf);
	return;
fail:
	vref_put(fs, r);
	free(buf);
	fail_read(fs, req, rc);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct bfs_fs *fs = FS(req);
	struct fh *h = (struct fh *)(uintptr_t)fi->fh;
	struct bfs_vnode n;
	int rc = bfs_vfs_get(fs->vfs, ino, &n);

	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	switch (n.type) {
	case BFS_V_README:
		reply_slice(req, fs->readme, fs->readme_len, off, size);
		return;
	case BFS_V_SCHEMA:
		reply_slice(req, fs->schema_json, fs->schema_len, off, size);
		return;
	case BFS_V_STATS:
	case BFS_V_ERRORS:
		if (h) /* opened with an OPEN request: its own snapshot */
			__atomic_add_fetch(&h->refs, 1, __ATOMIC_ACQ_REL);
		else
			h = dyn_current(fs, n.type);
		if (!h) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		reply_slice(req, h->text, h->len, off, size);
		fh_put(h);
		return;
	case BFS_V_SAFETENSORS:
	case BFS_V_NPY:
		if (n.all)
			read_view_file(fs, req, &n, size, off);
		else
			read_batch_file(fs, req, &n, size, off);
		return;
	default:
		fuse_reply_err(req, EISDIR);
	}
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	(void)ino;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = READ_CHUNK;
	sv.f_frsize = 512;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

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

static void op_setxattr(fuse_req_t req, fuse_ino_t i, const char *n, const char *v, size_t s,
			int f)
{
	(void)i, (void)n, (void)v, (void)s, (void)f;
	op_rofs_entry(req);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t i, const char *n)
{
	(void)i, (void)n;
	op_rofs_entry(req);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
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
	bfs_cache_free(fs->cache);
	for (size_t i = 0; i < NVIEWS; i++)
		if (fs->views[i].r) {
			bfs_epoch_view_free(fs->views[i].r->v);
			free(fs->views[i].r);
		}
	pthread_mutex_destroy(&fs->vlock);
	fh_put(fs->dyn[0]);
	fh_put(fs->dyn[1]);
	pthread_mutex_destroy(&fs->dlock);
	bfs_vfs_free(fs->vfs);
	bfs_geom_free(fs->geom_full);
	bfs_geom_free(fs->geom_last);
	free(fs->readme);
	free(fs->schema_json);
	free(fs->options_text);
	free(fs->errors);
	free(fs->error_hashes);
	pthread_mutex_destroy(&fs->elock);
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
	pthread_mutex_init(&fs->elock, NULL);
	pthread_mutex_init(&fs->vlock, NULL);
	pthread_mutex_init(&fs->dlock, NULL);
	fs->cfg = *cfg;
	if (getenv("BATCHFS_OPEN_REQUESTS") && strcmp(getenv("BATCHFS_OPEN_REQUESTS"), "1") == 0)
		fs->cfg.keep_open = true;
	fs->ds = cfg->ds;
	fs->b = cfg->batcher;
	fs->mount_time = time(NULL);
	fs->uid = getuid();
	fs->gid = getgid();
	fs->readme = strdup(cfg->readme ? cfg->readme : "");
	fs->schema_json = strdup(cfg->schema_json ? cfg->schema_json : "{}\n");
	fs->options_text = strdup(cfg->options_text ? cfg->options_text : "");
	fs->error_hashes = calloc(MAX_ERROR_LINES, sizeof(uint64_t));
	if (!fs->readme || !fs->schema_json || !fs->options_text || !fs->error_hashes) {
		rc = -ENOMEM;
		goto fail;
	}
	fs->readme_len = strlen(fs->readme);
	fs->schema_len = strlen(fs->schema_json);
	rc = bfs_vfs_new(&fs->vfs, plan, nb, cfg->epochs);
	if (rc)
		goto fail;
	if (plan->nslots == 0 && nb > 0) {
		rc = bfs_batcher_geom(&fs->geom_full, fs->b, 0, 0);
		if (!rc)
			rc = bfs_batcher_geom(&fs->geom_last, fs->b, 0, nb - 1);
		if (rc)
			goto fail;
	}
	rc = bfs_cache_new(&fs->cache, fs->b, cfg->cache_size, cfg->threads, cfg->prefetch,
			   bfs_fs_report, fs);
	if (rc)
		goto fail;
	*out = fs;
	return 0;
fail:
	bfs_fs_free(fs);
	return rc;
}

/* The kernel caps a FUSE mount's readahead at its default (128 KiB), whatever
 * max_readahead says; a root daemon can raise it through the mount's bdi.
 * Found via /proc/self/mountinfo so that no request to ourselves is needed.
 * Best effort: without it sequential reads are 128-256 KiB requests. */
static void raise_readahead(const char *mountpoint, unsigned kb)
{
	char abs[PATH_MAX], line[4096], path[128];
	FILE *f;
	unsigned maj = 0, min = 0;
	bool found = false;

	if (!realpath(mountpoint, abs))
		return;
	f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char mnt[4096], fstype[256];
		unsigned a, b;
		/* id parent maj:min root mountpoint opts ... - fstype source super */
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &a, &b, mnt) != 3)
			continue;
		char *dash = strstr(line, " - ");
		if (!dash || sscanf(dash, " - %255s", fstype) != 1)
			continue;
		if (strcmp(mnt, abs) == 0 && strncmp(fstype, "fuse", 4) == 0) {
			maj = a;
			min = b;
			found = true; /* the last match is the topmost mount */
		}
	}
	fclose(f);
	if (!found)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "%u\n", kb);
		fclose(f);
	}
}

int bfs_fs_run(struct bfs_fs *fs, int argc, char **argv, const char *mountpoint,
	       bool foreground)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *lc = NULL;
	struct fuse_session *se = NULL;
	int ret = 1;

	for (int i = 0; i < argc; i++)
		if (fuse_opt_add_arg(&args, argv[i]) != 0)
			goto out;
	se = fuse_session_new(&args, &ops, sizeof(ops), fs);
	if (!se) {
		fprintf(stderr, "batchfs: could not create the FUSE session (bad FUSE option?)\n");
		goto out;
	}
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, mountpoint) != 0) {
		fprintf(stderr, "batchfs: %s: could not mount\n", mountpoint);
		goto out_signals;
	}
	raise_readahead(mountpoint, READ_CHUNK >> 10);
	/* detach only now that the mount is ready; threads start after fork */
	if (fuse_daemonize(foreground) != 0)
		goto out_unmount;
	if (bfs_cache_start(fs->cache) != 0)
		fprintf(stderr, "batchfs: prefetch workers did not start; decoding on demand\n");
	lc = fuse_loop_cfg_create();
	if (!lc)
		goto out_unmount;
	fuse_loop_cfg_set_max_threads(lc, fs->cfg.fuse_threads ? fs->cfg.fuse_threads : 16);
	fuse_loop_cfg_set_clone_fd(lc, 0);
	/* a signal ends the loop too: that is a clean unmount */
	fuse_session_loop_mt(se, lc);
	ret = 0;
	fuse_loop_cfg_destroy(lc);
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out:
	fuse_opt_free_args(&args);
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
