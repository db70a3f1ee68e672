/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shadow.c — plain copies of compressed shards in index_dir (see shadow.h).
 *
 * File: stream bytes [0, stream_size), the shard's absolute path, then
 * struct trailer. The trailer comes last so that the stream starts at
 * offset 0 and the copy is read exactly like a plain shard.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "shadow.h"

#include "crc32c.h"
#include "s3.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define SHADOW_MAGIC "BFSSHD01"
#define SUFFIX ".shadow"
#define TMP_MARK ".shadow.tmp."
#define WBUF ((size_t)1 << 20) /* output gathered per write(2) */

struct trailer {
	char magic[8];
	uint32_t comp;
	uint32_t pathlen;
	uint64_t shard_size;
	int64_t shard_mtime_ns;
	uint64_t stream_size;
	uint64_t nrecords;
	uint32_t crc; /* CRC32C of the path, then of this struct up to here */
	uint32_t pad;
};

struct bfs_shadows {
	char *dir;
	uint64_t budget;
	void (*note)(void *ctx, const char *shard, const char *msg);
	void *ctx;
	atomic_uint_fast64_t used; /* valid shadows + bytes being written */
	atomic_bool stopped; /* a write failed for space or permission */
	atomic_flag said_stopped, said_budget, said_bad;
};

struct bfs_shadow_writer {
	struct bfs_shadows *sh;
	struct bfs_shard *s;
	char path[PATH_MAX + 64], tmp[PATH_MAX + 96];
	char abs[PATH_MAX];
	int fd;
	uint8_t *buf;
	size_t nbuf;
	uint64_t written; /* stream bytes taken (reserved in sh->used) */
	int err; /* first failure: 0, -errno, or 1 for the budget */
};

/* ------------------------------------------------------------ helpers */

static void note(struct bfs_shadows *sh, atomic_flag *once, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void note(struct bfs_shadows *sh, atomic_flag *once, const char *fmt, ...)
{
	char msg[PATH_MAX + 256];
	va_list ap;

	if (!sh->note || atomic_flag_test_and_set(once))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sh->note(sh->ctx, NULL, msg);
}

/* An object in a bucket (objsrc.h): its name is its URL, its "mtime" the
 * hash of its ETag. */
static bool is_url(const char *p)
{
	return bfs_s3_url_is(p);
}

/* The shard's absolute path (its real path when it resolves; an object's
 * URL). */
static int shard_abs(char abs[PATH_MAX], const struct bfs_shard *s)
{
	const char *p = bfs_shard_path(s);

	if (!is_url(p) && realpath(p, abs))
		return 0;
	if ((p[0] != '/' && !is_url(p)) || strlen(p) >= PATH_MAX)
		return -ENOENT;
	memcpy(abs, p, strlen(p) + 1);
	return 0;
}

static void shadow_path(char *dst, size_t cap, const char *dir, const char *abs)
{
	snprintf(dst, cap, "%s/%016llx" SUFFIX, dir,
		 (unsigned long long)bfs_fnv1a(0xcbf29ce484222325ull, abs, strlen(abs)));
}

static uint32_t trailer_crc(const struct trailer *t, const char *path)
{
	return bfs_crc32c(bfs_crc32c(0, path, t->pathlen), t, offsetof(struct trailer, crc));
}

static int pread_all(int fd, void *buf, size_t n, off_t off)
{
	uint8_t *b = buf;

	while (n) {
		ssize_t r = pread(fd, b, n, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EIO;
		b += r;
		n -= (size_t)r;
		off += r;
	}
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = write(fd, b, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read and check the trailer of open shadow fd (its size st_size): 0 with
 * *t and path filled, or -EBADMSG. */
static int read_trailer(int fd, uint64_t size, struct trailer *t, char path[PATH_MAX])
{
	if (size < sizeof(*t) || pread_all(fd, t, sizeof(*t), (off_t)(size - sizeof(*t))) != 0)
		return -EBADMSG;
	if (memcmp(t->magic, SHADOW_MAGIC, 8) != 0 || t->pathlen == 0 || t->pathlen >= PATH_MAX ||
	    t->stream_size > size || size - t->stream_size != t->pathlen + sizeof(*t))
		return -EBADMSG;
	if (pread_all(fd, path, t->pathlen, (off_t)t->stream_size) != 0)
		return -EBADMSG;
	path[t->pathlen] = '\0';
	if (strlen(path) != t->pathlen || trailer_crc(t, path) != t->crc)
		return -EBADMSG;
	return 0;
}

/* Open s's shadow and check it against s: the descriptor, or -1. */
static int open_valid(struct bfs_shadows *sh, const struct bfs_shard *s, char *path, size_t cap)
{
	char abs[PATH_MAX], got[PATH_MAX];
	struct trailer t;
	struct stat st;
	int fd;

	if (bfs_shard_compression(s) == BFS_COMP_NONE || bfs_shard_nrecords(s) == 0 ||
	    shard_abs(abs, s) != 0)
		return -1;
	shadow_path(path, cap, sh->dir, abs);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    read_trailer(fd, (uint64_t)st.st_size, &t, got) != 0 || strcmp(got, abs) != 0 ||
	    t.comp != (uint32_t)bfs_shard_compression(s) ||
	    t.shard_size != bfs_shard_file_size(s) || t.shard_mtime_ns != bfs_shard_mtime_ns(s) ||
	    t.stream_size != bfs_shard_stream_size(s) || t.nrecords != bfs_shard_nrecords(s)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---------------------------------------------------------------- set */

/* A leftover "<name>.shadow.tmp.PID" of a process that is gone. */
static bool dead_tmp(const char *name)
{
	const char *m = strstr(name, TMP_MARK);
	char *end;
	long pid;

	if (!m)
		return false;
	pid = strtol(m + strlen(TMP_MARK), &end, 10);
	return *end == '\0' && pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Keep a shadow whose shard is there unchanged (counting its bytes);
 * delete any other. */
static void sweep_one(struct bfs_shadows *sh, int dfd, const char *name)
{
	char shard[PATH_MAX];
	struct trailer t;
	struct stat st, sst;
	bool keep = false;
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    read_trailer(fd, (uint64_t)st.st_size, &t, shard) == 0) {
		/* an object's cannot be checked without listing its bucket:
		 * kept; it is used only when its size and ETag are those
		 * listed (open_valid), and a new version's shadow replaces it
		 * (the same name) */
		keep = is_url(shard) ||
		       (stat(shard, &sst) == 0 && (uint64_t)sst.st_size == t.shard_size &&
			(int64_t)sst.st_mtim.tv_sec * 1000000000 + sst.st_mtim.tv_nsec ==
				t.shard_mtime_ns);
	}
	close(fd);
	if (keep)
		atomic_fetch_add(&sh->used, (uint64_t)st.st_size);
	else
		(void)unlinkat(dfd, name, 0);
}

static void sweep(struct bfs_shadows *sh)
{
	DIR *d = opendir(sh->dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name), k = strlen(SUFFIX);

		if (de->d_name[0] == '.')
			continue;
		if (dead_tmp(de->d_name))
			(void)unlinkat(dirfd(d), de->d_name, 0);
		else if (n > k && strcmp(de->d_name + n - k, SUFFIX) == 0)
			sweep_one(sh, dirfd(d), de->d_name);
	}
	closedir(d);
}

/* mkdir -p, best effort: a directory we cannot make only means no shadows */
static void make_dir(const char *dir)
{
	char tmp[PATH_MAX];
	size_t len = strlen(dir);

	if (len == 0 || len >= sizeof(tmp))
		return;
	memcpy(tmp, dir, len + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		(void)mkdir(tmp, 0755);
		*p = '/';
	}
	(void)mkdir(tmp, 0755);
}

int bfs_shadows_new(struct bfs_shadows **out, const struct bfs_shadow_opts *o)
{
	struct bfs_shadows *sh = calloc(1, sizeof(*sh));

	if (!sh)
		return bfs_err_set(-ENOMEM, "out of memory");
	if (o->dir[0] == '/') {
		sh->dir = strdup(o->dir);
	} else { /* absolute: the daemon reopens files after chdir("/") */
		char *cwd = getcwd(NULL, 0);

		if (cwd && asprintf(&sh->dir, "%s/%s", cwd, o->dir) < 0)
			sh->dir = NULL;
		free(cwd);
	}
	if (!sh->dir) {
		free(sh);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	make_dir(sh->dir);
	sh->budget = o->budget;
	sh->note = o->note;
	sh->ctx = o->ctx;
	atomic_init(&sh->used, 0);
	atomic_init(&sh->stopped, false);
	atomic_flag_clear(&sh->said_stopped);
	atomic_flag_clear(&sh->said_budget);
	atomic_flag_clear(&sh->said_bad);
	sweep(sh);
	*out = sh;
	return 0;
}

void bfs_shadows_free(struct bfs_shadows *sh)
{
	if (!sh)
		return;
	free(sh->dir);
	free(sh);
}

uint64_t bfs_shadows_used(const struct bfs_shadows *sh)
{
	return atomic_load(&((struct bfs_shadows *)(uintptr_t)sh)->used);
}

bool bfs_shadow_valid(struct bfs_shadows *sh, const struct bfs_shard *s)
{
	char path[PATH_MAX + 64];
	int fd = open_valid(sh, s, path, sizeof(path));

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

bool bfs_shadow_wanted(struct bfs_shadows *sh, const struct bfs_shard *s)
{
	uint64_t need = bfs_shard_stream_size(s) + sizeof(struct trailer) + PATH_MAX;
	struct statvfs vfs;

	if (bfs_shard_compression(s) == BFS_COMP_NONE || bfs_shard_nrecords(s) == 0 ||
	    atomic_load(&sh->stopped) || bfs_shadow_valid(sh, s))
		return false;
	if (bfs_shadows_used(sh) + need > sh->budget || access(sh->dir, W_OK) != 0 ||
	    statvfs(sh->dir, &vfs) != 0 || (uint64_t)vfs.f_bavail * vfs.f_frsize < need)
		return false;
	return true;
}

/* ------------------------------------------------------------- writer */

/* Writing stops for the whole set when the directory cannot take it. */
static bool stops_all(int err)
{
	return err == -ENOSPC || err == -EDQUOT || err == -EROFS || err == -EACCES || err == -EPERM;
}

static void writer_fail(struct bfs_shadow_writer *w, int err)
{
	struct bfs_shadows *sh = w->sh;

	if (w->err)
		return;
	w->err = err;
	if (err == 1) {
		note(sh, &sh->said_budget,
		     "shadow_size=%llu reached in %s: compressed shards past it keep seek points",
		     (unsigned long long)sh->budget, sh->dir);
	} else if (stops_all(err)) {
		atomic_store(&sh->stopped, true);
		note(sh, &sh->said_stopped,
		     "%s: cannot write shadow copies (%s): compressed shards keep seek points",
		     sh->dir, strerror(-err));
	}
	/* nothing of a failed write stays on disk, nor in the budget */
	if (w->fd >= 0) {
		close(w->fd);
		w->fd = -1;
		(void)unlink(w->tmp);
	}
	atomic_fetch_sub(&sh->used, w->written);
	w->written = 0;
}

static void flush(struct bfs_shadow_writer *w)
{
	int err;

	if (w->err || !w->nbuf)
		return;
	err = write_all(w->fd, w->buf, w->nbuf);
	w->nbuf = 0;
	if (err)
		writer_fail(w, err);
}

static void sink(void *ctx, const uint8_t *data, size_t n)
{
	struct bfs_shadow_writer *w = ctx;

	if (w->err)
		return;
	if (atomic_fetch_add(&w->sh->used, n) + n > w->sh->budget) {
		atomic_fetch_sub(&w->sh->used, n);
		writer_fail(w, 1);
		return;
	}
	w->written += n;
	while (n && !w->err) {
		size_t k = WBUF - w->nbuf < n ? WBUF - w->nbuf : n;

		memcpy(w->buf + w->nbuf, data, k);
		w->nbuf += k;
		data += k;
		n -= k;
		if (w->nbuf == WBUF)
			flush(w);
	}
}

struct bfs_shadow_writer *bfs_shadow_begin(struct bfs_shadows *sh, struct bfs_shard *s)
{
	struct bfs_shadow_writer *w;

	if (bfs_shard_compression(s) == BFS_COMP_NONE || atomic_load(&sh->stopped) ||
	    bfs_shadow_valid(sh, s))
		return NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->sh = sh;
	w->s = s;
	w->fd = -1;
	if (shard_abs(w->abs, s) != 0 || !(w->buf = malloc(WBUF))) {
		free(w);
		return NULL;
	}
	shadow_path(w->path, sizeof(w->path), sh->dir, w->abs);
	snprintf(w->tmp, sizeof(w->tmp), "%s.tmp.%ld", w->path, (long)getpid());
	w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (w->fd < 0) {
		writer_fail(w, -errno);
		free(w->buf);
		free(w);
		return NULL;
	}
	bfs_shard_set_sink(s, sink, w);
	return w;
}

void bfs_shadow_end(struct bfs_shadow_writer *w, int scan_err)
{
	struct trailer t;

	if (!w)
		return;
	bfs_shard_set_sink(w->s, NULL, NULL);
	if (scan_err || w->written != bfs_shard_stream_size(w->s) ||
	    bfs_shard_nrecords(w->s) == 0) {
		/* a failed scan, or a stream with bytes past its last record */
		writer_fail(w, -ECANCELED);
	}
	flush(w);
	if (!w->err) {
		memset(&t, 0, sizeof(t));
		memcpy(t.magic, SHADOW_MAGIC, 8);
		t.comp = (uint32_t)bfs_shard_compression(w->s);
		t.pathlen = (uint32_t)strlen(w->abs);
		t.shard_size = bfs_shard_file_size(w->s);
		t.shard_mtime_ns = bfs_shard_mtime_ns(w->s);
		t.stream_size = w->written;
		t.nrecords = bfs_shard_nrecords(w->s);
		t.crc = trailer_crc(&t, w->abs);
		if (atomic_fetch_add(&w->sh->used, t.pathlen + sizeof(t)) + t.pathlen + sizeof(t) >
		    w->sh->budget) {
			atomic_fetch_sub(&w->sh->used, t.pathlen + sizeof(t));
			writer_fail(w, 1);
		} else {
			int err = write_all(w->fd, w->abs, t.pathlen);

			w->written += t.pathlen + sizeof(t);
			if (!err)
				err = write_all(w->fd, &t, sizeof(t));
			if (!err && close(w->fd) != 0)
				err = -errno;
			else if (err)
				close(w->fd);
			w->fd = -1;
			if (!err && rename(w->tmp, w->path) != 0)
				err = -errno;
			if (err) {
				(void)unlink(w->tmp);
				writer_fail(w, err);
			}
		}
	}
	if (w->fd >= 0)
		close(w->fd);
	free(w->buf);
	free(w);
}

/* ------------------------------------------------------------- attach */

/* A read found the copy bad (and the compressed shard gave the record):
 * say so once, and delete the file so that the next mount writes it
 * again. This mount keeps the copy for the records it still serves right. */
static void on_bad_copy(void *ctx, const struct bfs_shard *s, uint64_t i, const char *msg)
{
	(void)i;
	struct bfs_shadows *sh = ctx;
	char abs[PATH_MAX], path[PATH_MAX + 64];

	note(sh, &sh->said_bad, "%s: bad shadow copy (%s): read from the shard instead; deleted",
	     bfs_shard_path(s), msg);
	if (shard_abs(abs, s) == 0) {
		shadow_path(path, sizeof(path), sh->dir, abs);
		(void)unlink(path);
	}
}

bool bfs_shadow_attach(struct bfs_shadows *sh, struct bfs_shard *s)
{
	char path[PATH_MAX + 64];
	struct bfs_shard *view;
	int fd = open_valid(sh, s, path, sizeof(path));

	if (fd < 0)
		return false;
	if (bfs_shard_open_view(&view, path, fd, s) != 0) {
		close(fd);
		return false;
	}
	bfs_shard_set_shadow(s, view, on_bad_copy, sh);
	return true;
}
