/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record.c — a TFRecord shard as an object: opening it (compression
 * detected from its first bytes; a local file, a view of a copy, or an
 * object read through callbacks), its identity and accessors, where its
 * bytes come from (the descriptor cache, an object's reads, the I/O
 * stage), its index once built or loaded, the mapping of a plain shard of
 * small records, and the hooks that let shadow.c keep a plain copy of a
 * compressed one.
 *
 * The scan is record_scan.c, reading records record_read.c, everything
 * that inflates record_z.c (see record_impl.h).
 *
 * Does not: decode protobufs, cache anything, or know about threads/FUSE.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "record_impl.h"

#include "fetch.h"
#include "mapguard.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

static atomic_long nmapped; /* shards mapped now (see bfs_shard_maybe_map) */

void bfs_shard_set_bad_fn(struct bfs_shard *s, bfs_bad_record_fn fn, void *ctx)
{
	s->bad_fn = fn;
	s->bad_ctx = ctx;
}

/* ---- the shard's bytes ---------------------------------------------------- */

/* pread until n bytes or end of file. Returns bytes read or -errno. */
static ssize_t pread_full(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* ---- names ------------------------------------------------------------- */

static const char *const comp_names[] = {
	[BFS_COMP_AUTO] = "auto",
	[BFS_COMP_NONE] = "none",
	[BFS_COMP_GZIP] = "gzip",
	[BFS_COMP_ZLIB] = "zlib",
};

const char *bfs_compression_name(enum bfs_compression c)
{
	if ((unsigned)c < BFS_ARRAY_SIZE(comp_names))
		return comp_names[c];
	return "?";
}

int bfs_compression_parse(enum bfs_compression *out, const char *s)
{
	if (!s)
		return bfs_err_set(-EINVAL, "compression: missing value");
	for (size_t i = 0; i < BFS_ARRAY_SIZE(comp_names); i++) {
		if (strcasecmp(s, comp_names[i]) == 0) {
			*out = (enum bfs_compression)i;
			return 0;
		}
	}
	return bfs_err_set(-EINVAL, "compression: unknown value '%s' (auto, none, gzip, zlib)", s);
}

/* The shard's bytes, pinned for one use: a file's descriptor is then
 * valid (fs.fd); a shard read through io needs nothing. 0 or -errno. */
int bfs_shard_pin(struct bfs_shard *s)
{
	return s->io ? 0 : bfs_fdslot_pin(&s->fs);
}

void bfs_shard_unpin(struct bfs_shard *s)
{
	if (!s->io)
		bfs_fdslot_unpin(&s->fs);
}

/* n bytes at off (pinned): bytes read, fewer only at the end, or -errno
 * (io: with its message set). */
ssize_t bfs_shard_pread(const struct bfs_shard *s, void *buf, size_t n, uint64_t off)
{
	if (s->io) {
		ssize_t got = 0;

		while ((size_t)got < n) {
			ssize_t r = s->io->pread(s->io_obj, (uint8_t *)buf + got, n - (size_t)got,
						 off + (uint64_t)got);
			if (r < 0)
				return r;
			if (r == 0)
				break;
			got += r;
		}
		return got;
	}
	return pread_full(s->fs.fd, buf, n, off);
}

/* preadv through the shard (pinned): bytes read or -errno. A shard read
 * through io gets the whole span in one read, then spread. */
ssize_t bfs_shard_preadv(const struct bfs_shard *s, const struct iovec *v, int nv, uint64_t off)
{
	size_t total = 0, at = 0;
	uint8_t *tmp;
	ssize_t n;

	if (!s->io) {
		do
			n = preadv(s->fs.fd, v, nv, (off_t)off);
		while (n < 0 && errno == EINTR);
		return n < 0 ? -errno : n;
	}
	for (int i = 0; i < nv; i++)
		total += v[i].iov_len;
	tmp = malloc(total ? total : 1);
	if (!tmp)
		return bfs_err_set(-ENOMEM, "out of memory");
	n = bfs_shard_pread(s, tmp, total, off);
	for (int i = 0; i < nv && n > 0 && at < (size_t)n; i++) {
		size_t k = v[i].iov_len < (size_t)n - at ? v[i].iov_len : (size_t)n - at;

		memcpy(v[i].iov_base, tmp + at, k);
		at += k;
	}
	free(tmp);
	return n;
}

/* A message for a failed read: io's own (it names the object and range),
 * else strerror. */
const char *bfs_shard_read_why(const struct bfs_shard *s, ssize_t n, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s", s->io && bfs_err_msg()[0] ? bfs_err_msg() : strerror((int)-n));
	return buf;
}

/* ---- open / close ------------------------------------------------------ */

enum bfs_compression bfs_shard_sniff(const uint8_t *b, size_t n)
{
	uint32_t stored, calc;

	if (n >= HDR_LEN && frame_crc_ok(b, 8, b + 8, &stored, &calc))
		return BFS_COMP_NONE;
	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return BFS_COMP_GZIP;
	if (n >= 2 && (b[0] & 0x0f) == 8 && (b[0] >> 4) <= 7 && ((b[0] << 8) | b[1]) % 31 == 0)
		return BFS_COMP_ZLIB;
	return BFS_COMP_AUTO;
}

/* The compression of s from its first bytes (pinned). */
static int detect(const struct bfs_shard *s, enum bfs_compression *out)
{
	uint8_t b[HDR_LEN];
	char hex[3 * HDR_LEN + 1], why[512];
	ssize_t n;

	if (s->file_size == 0) {
		*out = BFS_COMP_NONE;
		return 0;
	}
	n = bfs_shard_pread(s, b, sizeof(b), 0);
	if (n < 0)
		return bfs_err_set((int)n, "read: %s", bfs_shard_read_why(s, n, why, sizeof(why)));
	*out = bfs_shard_sniff(b, (size_t)n);
	if (*out != BFS_COMP_AUTO)
		return 0;
	hex[0] = '\0';
	for (ssize_t i = 0, pos = 0; i < n; i++)
		pos += snprintf(hex + pos, sizeof(hex) - (size_t)pos, "%s%02x", i ? " " : "", b[i]);
	return bfs_err_set(-EBADMSG,
			   "not a TFRecord file (first bytes %s: neither a valid record header "
			   "nor a gzip or zlib stream)",
			   hex);
}

/* Filesystems whose reads cross a network or another process (statfs
 * f_type): NFS, SMB/CIFS, FUSE (gcsfuse, s3fs, sshfs...), Lustre, Ceph,
 * 9p, AFS, GPFS, BeeGFS, OrangeFS, GlusterFS (over FUSE), Coda, NCP. */
static bool remote_fs(long type)
{
	static const unsigned long magic[] = {
		0x6969, /* NFS */
		0x517B, /* SMB */
		0xFF534D42, /* CIFS */
		0xFE534D42, /* SMB2 */
		0x65735546, /* FUSE */
		0x0BD00BD0, /* Lustre */
		0x00C36400, /* Ceph */
		0x01021997, /* 9p */
		0x5346414F, /* AFS */
		0x6B414653, /* kAFS */
		0x47504653, /* GPFS */
		0x19830326, /* BeeGFS */
		0x20030528, /* OrangeFS / PVFS2 */
		0x73757245, /* Coda */
		0x564C, /* NCP */
	};

	for (size_t i = 0; i < BFS_ARRAY_SIZE(magic); i++)
		if ((unsigned long)(unsigned int)type == magic[i])
			return true;
	return false;
}

static int open_shard(struct bfs_shard **out, const char *path, enum bfs_compression comp,
		      bool detect_now)
{
	struct bfs_shard *s = NULL;
	struct statfs sfs;
	struct stat st;
	int fd = -1;
	int err;

	if ((unsigned)comp > BFS_COMP_ZLIB)
		return bfs_err_set(-EINVAL, "invalid compression %d", (int)comp);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		return bfs_err_set(err, "open: %s", strerror(-err));
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
		(void)bfs_err_set(err, "stat: %s", strerror(-err));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		err = bfs_err_set(-EINVAL, "not a regular file");
		goto out_close;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		err = bfs_err_set(-ENOMEM, "out of memory");
		goto out_close;
	}
	s->path = strdup(path);
	if (path[0] == '/') {
		s->open_path = strdup(path);
	} else {
		char *cwd = getcwd(NULL, 0);
		if (cwd && asprintf(&s->open_path, "%s/%s", cwd, path) < 0)
			s->open_path = NULL;
		free(cwd);
	}
	if (!s->path || !s->open_path) {
		err = bfs_err_set(-ENOMEM, "out of memory");
		goto out_free;
	}
	s->file_size = (uint64_t)st.st_size;
	if (comp == BFS_COMP_AUTO && detect_now) {
		s->fs.fd = fd; /* not in the descriptor cache yet */
		err = detect(s, &comp);
		if (err)
			goto out_free;
	}
	bfs_fdslot_init(&s->fs, s->open_path, fd, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
	s->comp = comp;
	s->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	s->remote = fstatfs(fd, &sfs) == 0 && remote_fs((long)sfs.f_type);
	*out = s;
	return 0;

out_free:
	free(s->path);
	free(s->open_path);
	free(s);
out_close:
	close(fd);
	return err;
}

int bfs_shard_open(struct bfs_shard **out, const char *path, enum bfs_compression comp)
{
	return open_shard(out, path, comp, true);
}

int bfs_shard_open_undetected(struct bfs_shard **out, const char *path)
{
	return open_shard(out, path, BFS_COMP_AUTO, false);
}

int bfs_shard_open_io(struct bfs_shard **out, const char *name, uint64_t size, int64_t version,
		      const struct bfs_shard_io *io, void *obj)
{
	struct bfs_shard *s = calloc(1, sizeof(*s));

	if (!s || !(s->path = strdup(name)) || !(s->open_path = strdup(name))) {
		if (s)
			free(s->path);
		free(s);
		io->close(obj);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	s->fs.fd = -1;
	s->io = io;
	s->io_obj = obj;
	s->comp = BFS_COMP_AUTO;
	s->file_size = size;
	s->mtime_ns = version;
	s->remote = true;
	*out = s;
	return 0;
}

void *bfs_shard_io_obj(const struct bfs_shard *s)
{
	return s->io_obj;
}

int bfs_shard_detect(struct bfs_shard *s, enum bfs_compression known)
{
	enum bfs_compression c = known;
	int err;

	if ((unsigned)known > BFS_COMP_ZLIB)
		return bfs_err_set(-EINVAL, "invalid compression %d", (int)known);
	if (known == BFS_COMP_AUTO) {
		err = bfs_shard_pin(s);
		if (err)
			return err;
		err = detect(s, &c);
		bfs_shard_unpin(s);
		if (err)
			return err;
	}
	s->comp = c;
	return 0;
}

void bfs_shard_close(struct bfs_shard *s)
{
	if (!s)
		return;
	if (s->map) {
		munmap((void *)(uintptr_t)s->map, (size_t)s->file_size);
		atomic_fetch_sub(&nmapped, 1);
	}
	bfs_shard_close(s->shadow);
	for (struct bfs_shard *v = s->retired, *next; v; v = next) {
		next = v->retired;
		v->retired = NULL;
		bfs_shard_close(v);
	}
	if (s->io)
		s->io->close(s->io_obj);
	else
		bfs_fdslot_release(&s->fs);
	free(s->path);
	free(s->open_path);
	if (!s->ix_borrowed)
		bfs_index_free(s->ix);
	free(s);
}

const char *bfs_shard_path(const struct bfs_shard *s)
{
	return s->path;
}

enum bfs_compression bfs_shard_compression(const struct bfs_shard *s)
{
	return s->comp;
}

uint64_t bfs_shard_file_size(const struct bfs_shard *s)
{
	return s->file_size;
}

int64_t bfs_shard_mtime_ns(const struct bfs_shard *s)
{
	return s->mtime_ns;
}

uint64_t bfs_shard_nrecords(const struct bfs_shard *s)
{
	return s->nlocs;
}

const struct bfs_index *bfs_shard_get_index(const struct bfs_shard *s)
{
	return s->ix && s->ix->dir ? s->ix : NULL;
}

uint64_t bfs_shard_record_offset(const struct bfs_shard *s, uint64_t i)
{
	return i <= s->nlocs && s->ix && s->ix->dir ? bfs_index_offset(s->ix, i) : 0;
}

uint32_t bfs_shard_record_len(const struct bfs_shard *s, uint64_t i)
{
	return i < s->nlocs ? bfs_index_len(s->ix, i) : 0;
}

uint32_t bfs_shard_max_len(const struct bfs_shard *s)
{
	return s->ix ? s->ix->max_len : 0;
}

/* ---- the I/O stage ------------------------------------------------------ */

bool bfs_shard_is_remote(const struct bfs_shard *s)
{
	return s->remote;
}

uint64_t bfs_shard_dev(const struct bfs_shard *s)
{
	return s->io ? 0 : s->fs.dev;
}

void bfs_shard_set_fetch(struct bfs_shard *s, struct bfs_fetch *f, uint32_t id)
{
	s->fetch = f;
	s->fetch_id = id;
}

int bfs_shard_pin_fd(struct bfs_shard *s, int *fd)
{
	int err = s->io ? bfs_err_set(-EBADF, "not a file") : bfs_fdslot_pin(&s->fs);

	if (err) {
		bfs_err_prefix("%s", s->path);
		return err;
	}
	*fd = s->fs.fd;
	return 0;
}

void bfs_shard_unpin_fd(struct bfs_shard *s)
{
	bfs_fdslot_unpin(&s->fs);
}

bool bfs_shard_span(const struct bfs_shard *s, uint64_t i, uint64_t j, uint64_t *off, uint64_t *len)
{
	uint64_t a, b;

	if (!s->fetch || s->shadow || i >= j || j > s->nlocs)
		return false;
	a = loc_of(s, i).offset;
	b = bfs_index_offset(s->ix, j); /* the end of record j - 1 */
	if (s->comp != BFS_COMP_NONE) {
		/* inflate starts at the seek point before the first record (its
		 * primed bits in the byte before) and may read a whole input
		 * chunk past the point after the last */
		const struct bfs_seek_point *p = find_point(s, a), *q = point_after(s, b);

		a = p ? p->in_off - (p->bits ? 1 : 0) : 0;
		b = q ? q->in_off + READ_IN_CHUNK : s->file_size;
		if (b > s->file_size)
			b = s->file_size;
	}
	*off = a;
	*len = b > a ? b - a : 0;
	return true;
}

/* Bytes [off, off + n) of the shard (pinned): from its I/O stage when it
 * holds them, else asked of it now (so that they come through it and its
 * disk cache, not past both: a compressed shard's input, read in chunks
 * that no plan need hold whole), else read. Bytes read or a negative
 * errno. */
ssize_t bfs_shard_src_pread(const struct bfs_shard *s, void *buf, size_t n, uint64_t off)
{
	if (s->fetch) {
		struct iovec v = { buf, n };
		struct bfs_fetch_range r = { s->fetch_id, off, n };
		struct bfs_fetch_ticket *t = NULL;
		int rc = bfs_fetch_copyv(s->fetch, s->fetch_id, off, &v, 1);

		if (rc == -ENODATA &&
		    bfs_fetch_want(s->fetch, &r, 1, BFS_FETCH_NOW, BFS_WANT_DEMAND, &t) == 0) {
			rc = bfs_fetch_copyv(s->fetch, s->fetch_id, off, &v, 1);
			bfs_fetch_release(s->fetch, t);
		}
		if (rc == 0)
			return (ssize_t)n;
		if (rc != -ENODATA)
			return rc;
	}
	return bfs_shard_pread(s, buf, n, off);
}

/* ---- index storage ----------------------------------------------------- */

/* Plain shards of small records are read through a mapping once indexed: a
 * shuffled record then costs a copy, not a system call. Large records
 * (MAP_MAX_AVG and up on average) keep pread, which copies them as cheaply
 * and keeps their pages out of the daemon's resident set (measured on
 * 'image': mapped 150 KB records cost page faults and ~1 GiB of
 * file-backed RSS for nothing). Without a mapping (no address space, no
 * SIGBUS guard) reads use pread. */
#define MAP_MAX_AVG ((uint64_t)64 << 10)

/* Every mapping is one of the process's vm.max_map_count areas (65530 by
 * default), which malloc, thread stacks and libraries share: shards map
 * while fewer than a quarter of them are taken by shards, and read with
 * pread past that (a dataset of 20,000 tiny shards maps 16,382 of them). A
 * mapping needs no descriptor once made. */

static long map_budget(void)
{
	static atomic_long budget;
	long b = atomic_load(&budget);

	if (!b) {
		FILE *f = fopen("/proc/sys/vm/max_map_count", "re");
		long m = 0;

		if (!f || fscanf(f, "%ld", &m) != 1 || m <= 0)
			m = 65530;
		if (f)
			fclose(f);
		b = m / 4 > 0 ? m / 4 : 1;
		atomic_store(&budget, b);
	}
	return b;
}

void bfs_shard_maybe_map(struct bfs_shard *s)
{
	void *m;

	if (s->map || s->remote || s->comp != BFS_COMP_NONE || s->nlocs == 0 || s->file_size == 0 ||
	    s->file_size > SIZE_MAX || s->file_size / s->nlocs >= MAP_MAX_AVG ||
	    bfs_mapguard_init() != 0)
		return;
	if (atomic_fetch_add(&nmapped, 1) >= map_budget()) {
		atomic_fetch_sub(&nmapped, 1);
		return;
	}
	if (bfs_fdslot_pin(&s->fs) != 0) {
		atomic_fetch_sub(&nmapped, 1);
		return; /* reads will pin it again and name the error */
	}
	m = mmap(NULL, (size_t)s->file_size, PROT_READ, MAP_SHARED, s->fs.fd, 0);
	bfs_fdslot_unpin(&s->fs);
	if (m != MAP_FAILED)
		s->map = m;
	else
		atomic_fetch_sub(&nmapped, 1);
}

/* The index is about to change: a view borrowing it must go first. */
void bfs_shard_drop_shadow(struct bfs_shard *s)
{
	bfs_shard_close(s->shadow);
	s->shadow = NULL;
}

int bfs_shard_set_index(struct bfs_shard *s, struct bfs_index *ix)
{
	int err = bfs_index_finish(ix);

	if (err)
		return err;
	for (size_t i = 0; i < ix->npts; i++)
		if (ix->pts[i].in_off > s->file_size)
			return bfs_err_set(-EINVAL, "index: seek point %zu is past the file's end",
					   i);
	bfs_shard_drop_shadow(s);
	bfs_index_free(s->ix);
	s->ix = ix;
	s->nlocs = ix->n;
	s->pts = ix->pts;
	s->npts = ix->npts;
	bfs_shard_maybe_map(s);
	return 0;
}

/* ---- the shadow: a plain copy of a compressed shard's stream ------------ */

void bfs_shard_set_sink(struct bfs_shard *s, bfs_stream_sink_fn fn, void *ctx)
{
	s->sink = fn;
	s->sink_ctx = ctx;
}

uint64_t bfs_shard_stream_size(const struct bfs_shard *s)
{
	struct bfs_record_loc l;

	if (!s->nlocs)
		return 0;
	l = loc_of(s, s->nlocs - 1);
	return l.offset + HDR_LEN + l.len + FOOT_LEN;
}

int bfs_shard_open_view(struct bfs_shard **out, const char *path, int fd,
			const struct bfs_shard *of)
{
	struct bfs_shard *v;
	struct stat st;

	if (fstat(fd, &st) != 0)
		return bfs_err_set(-errno, "%s: stat: %s", path, strerror(errno));
	if (path[0] != '/' || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size < bfs_shard_stream_size(of))
		return bfs_err_set(-EINVAL, "%s: not a view of %s", path, of->path);
	v = calloc(1, sizeof(*v));
	if (!v)
		return bfs_err_set(-ENOMEM, "out of memory");
	v->path = strdup(path);
	v->open_path = strdup(path);
	if (!v->path || !v->open_path) {
		free(v->path);
		free(v->open_path);
		free(v);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	bfs_fdslot_init(&v->fs, v->open_path, fd, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
	v->comp = BFS_COMP_NONE;
	v->file_size = (uint64_t)st.st_size;
	v->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	v->ix = of->ix;
	v->nlocs = of->nlocs;
	v->ix_borrowed = true;
	bfs_shard_maybe_map(v);
	*out = v;
	return 0;
}

bool bfs_shard_promote(struct bfs_shard *s, struct bfs_shard *view, bfs_shadow_fail_fn fn,
		       void *ctx)
{
	struct bfs_shard *none = NULL;

	if (atomic_load(&s->shadow))
		return false;
	/* again after a demotion: the same ones, which a failing read may be
	 * reading (left unwritten) */
	if (s->shadow_fail != fn || s->shadow_ctx != ctx) {
		s->shadow_fail = fn;
		s->shadow_ctx = ctx;
	}
	return atomic_compare_exchange_strong(&s->shadow, &none, view);
}

void bfs_shard_demote(struct bfs_shard *s)
{
	struct bfs_shard *view = atomic_exchange(&s->shadow, NULL), *top;

	if (!view)
		return;
	top = atomic_load(&s->retired);
	do
		view->retired = top;
	while (!atomic_compare_exchange_weak(&s->retired, &top, view));
}

void bfs_shard_set_shadow(struct bfs_shard *s, struct bfs_shard *view, bfs_shadow_fail_fn fn,
			  void *ctx)
{
	bfs_shard_drop_shadow(s);
	s->shadow = view;
	s->shadow_fail = fn;
	s->shadow_ctx = ctx;
}

bool bfs_shard_has_shadow(const struct bfs_shard *s)
{
	return s->shadow != NULL;
}

void bfs_shard_shadow_served(const struct bfs_shard *s, uint64_t *records, uint64_t *bytes)
{
	*records = atomic_load_explicit(&s->shadow_reads, memory_order_relaxed);
	*bytes = atomic_load_explicit(&s->shadow_bytes, memory_order_relaxed);
}
