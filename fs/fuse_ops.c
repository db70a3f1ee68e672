/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_ops.c — the handlers of a mount's FUSE requests (see fuse_ops.h):
 * glue that turns each request into calls of files.h (and the CUDA path's
 * cudaopen.h) and replies. The session itself is session.c's.
 */
#define FUSE_USE_VERSION 312

#include "fuse_ops_impl.h"

#include "cudaopen.h"
#include "files.h"
#include "vfs.h"

#include <fuse_lowlevel.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Files are immutable for the life of the mount: cache names and
 * attributes for a long time. */
#define LONG_TIMEOUT 86400.0
#define READ_CHUNK BFS_FILES_BLKSIZE

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
	fs->no_open = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) && !fs->keep_open;
	fs->no_opendir = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) && !fs->keep_open;
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

/* Who asks (files.h): the calling thread, and whether on its way to a read
 * (a GETATTR with a file handle). */
static struct bfs_files_asker asker(fuse_req_t req, bool reading)
{
	return (struct bfs_files_asker){ .reader = (uint64_t)fuse_req_ctx(req)->pid,
					 .reading = reading };
}

/* n's entry: its attributes and how long the kernel may keep them. */
static int fill_entry(struct bfs_fs *fs, const struct bfs_files_asker *who,
		      const struct bfs_vnode *n, struct fuse_entry_param *e)
{
	int rc = bfs_files_stat(fs->files, n, who, &e->attr);

	if (rc)
		return rc;
	e->ino = n->ino;
	e->generation = 1;
	e->attr_timeout = bfs_files_dynamic(n) ? 0 : LONG_TIMEOUT;
	e->entry_timeout = LONG_TIMEOUT;
	return 0;
}

static int do_lookup(struct bfs_fs *fs, const struct bfs_files_asker *who, fuse_ino_t parent,
		     const char *name, struct fuse_entry_param *e)
{
	struct bfs_vnode dir, n;
	int rc = bfs_vfs_get(fs->vfs, parent, &dir);

	memset(e, 0, sizeof(*e));
	if (!rc)
		rc = bfs_vfs_lookup(fs->vfs, &dir, name, &n);
	if (!rc)
		rc = fill_entry(fs, who, &n, e);
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
	struct bfs_files_asker who = asker(req, false);
	int rc = do_lookup(FS(req), &who, parent, name, &e);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

static int do_getattr(struct bfs_fs *fs, const struct bfs_files_asker *who, fuse_ino_t ino,
		      struct stat *st, double *timeout)
{
	struct bfs_vnode n;
	int rc = bfs_vfs_get(fs->vfs, ino, &n);

	if (!rc)
		rc = bfs_files_stat(fs->files, &n, who, st);
	if (!rc)
		*timeout = bfs_files_dynamic(&n) ? 0 : LONG_TIMEOUT;
	return rc;
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	double timeout = 0;
	/* with a file handle: on the way to a read(2) of an open file */
	struct bfs_files_asker who = asker(req, fi != NULL);
	int rc = do_getattr(FS(req), &who, ino, &st, &timeout);

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
	struct bfs_files_asker who = asker(req, false);
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
				(void)fill_entry(fs, &who, &n, &e);
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

/* ------------------------------------------------------------ open, release
 *
 * An OPEN of batch-B.cuda is answered by the CUDA path (cudaopen.h): with
 * the pool of device buffers taken, it waits without holding a thread, and
 * is answered later from the thread that gives a buffer back, or from the
 * interrupt callback when its opener gives up.
 */

static int cuda_reply_open(void *req, uint64_t fh)
{
	struct fuse_file_info fi;

	memset(&fi, 0, sizeof(fi));
	fi.fh = fh;
	fi.direct_io = 1; /* every read comes here: it waits for the copy */
	return fuse_reply_open(req, &fi);
}

static void cuda_reply_error(void *req, int err)
{
	fuse_reply_err(req, err);
}

static bool cuda_gone(void *req)
{
	return fuse_req_interrupted(req);
}

static const struct bfs_cudaopen_replies cuda_replies = {
	.open = cuda_reply_open,
	.error = cuda_reply_error,
	.gone = cuda_gone,
};

/* The opener of a waiting OPEN got a signal: it gives up (EINTR). */
static void cuda_interrupted(fuse_req_t req, void *data)
{
	struct bfs_fs *fs = data;

	(void)bfs_cudaopen_interrupted(fs->copen, req);
}

static void cuda_open(struct bfs_fs *fs, fuse_req_t req, const struct bfs_vnode *n,
		      struct fuse_file_info *fi)
{
	bool nonblock = fi->flags & O_NONBLOCK;

	if (!nonblock)
		fuse_req_interrupt_func(req, cuda_interrupted, fs);
	bfs_cudaopen_open(fs->copen, &cuda_replies, req, n->rank, n->epoch, n->batch, nonblock);
}

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
	if (bfs_files_dynamic(n)) { /* opened with an OPEN request: a snapshot of its own */
		struct bfs_snapshot *h = NULL;

		rc = bfs_files_open_snapshot(fs->files, n, &h);
		if (rc)
			return rc;
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

/* A file closed: its snapshot, or its descriptor's reference, goes (the
 * last reference to a batch-B.cuda descriptor waits for its copy). */
static int do_release(struct bfs_fs *fs, fuse_ino_t ino, uint64_t fh)
{
	struct bfs_vnode n;
	int rc = bfs_vfs_get(fs->vfs, ino, &n);

	if (!rc)
		bfs_files_release(fs->files, &n, fh);
	return rc;
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* the kernel ignores RELEASE's answer: a failed lookup is not an error
	 * to pass on (and every inode a descriptor is open on exists) */
	(void)do_release(FS(req), ino, fi->fh);
	fuse_reply_err(req, 0);
}

/* ------------------------------------------------------------------ read */

static int do_read(struct bfs_fs *fs, uint64_t reader, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi, struct bfs_files_read *r, bool *dynamic)
{
	struct bfs_vnode n;
	int rc = bfs_vfs_get(fs->vfs, ino, &n);

	memset(r, 0, sizeof(*r));
	if (rc)
		return rc;
	*dynamic = bfs_files_dynamic(&n) && !fi->fh;
	return bfs_files_read(fs->files, &n, reader, fi->fh, size, (uint64_t)off, r);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct bfs_fs *fs = FS(req);
	struct bfs_files_read r;
	/* up to two pieces: v.buf[0], then `extra` as v.buf[1] */
	struct {
		struct fuse_bufvec v;
		struct fuse_buf extra;
	} bv = { .v = FUSE_BUFVEC_INIT(0) };
	bool dynamic = false;
	int rc = do_read(fs, (uint64_t)fuse_req_ctx(req)->pid, ino, size, off, fi, &r, &dynamic);

	bv.v.count = r.count;
	bv.v.buf[0].mem = (void *)r.p[0].mem;
	bv.v.buf[0].size = r.p[0].size;
	bv.extra.fd = -1;
	bv.extra.mem = (void *)r.p[1].mem;
	bv.extra.size = r.p[1].size;
	if (rc)
		fuse_reply_err(req, -rc);
	else if (r.zero_copy)
		fuse_reply_data(req, &bv.v, FUSE_BUF_SPLICE_MOVE);
	else
		fuse_reply_buf(req, r.count ? r.p[0].mem : NULL, r.count ? r.p[0].size : 0);
	/* what the reply borrowed is released once it is written */
	bfs_files_read_done(fs->files, &r);
	/* stats.json, errors.txt read through the page cache: the reader's
	 * next read(2) asks for their size again, even within the kernel's
	 * attribute tick (files.h: it then goes on with its snapshot) */
	if (dynamic)
		(void)fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
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

const struct fuse_lowlevel_ops bfs_fuse_ops = {
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

const size_t bfs_fuse_ops_size = sizeof(bfs_fuse_ops);
