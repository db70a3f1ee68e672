/*
 * record.c — TFRecord shards: compression detection, the streaming scan that
 * builds the index and zran-style seek points, and random access reads.
 *
 * The only file of the decoder that includes <zlib.h>.
 *
 * Scan: the uncompressed record stream is produced into one growable buffer
 * (plain: pread in 1 MiB chunks; gzip/zlib: inflate with Z_BLOCK so that we
 * stop at every deflate block boundary and can save a seek point there).
 * Records are parsed from that buffer; a record that spans chunks is made
 * contiguous by compacting and, if needed, growing the buffer. The buffer
 * grows at most by doubling, so a hostile declared length never makes us
 * allocate much more than the data actually present.
 *
 * Read: plain shards of small records are mapped (a record is a copy);
 * otherwise a batch's nearby records are one preadv per run, each record's
 * bytes landing in its own buffer (read_runs). Compressed shards restart a
 * raw inflate at the nearest seek point at or before the record (priming the
 * leftover bits and installing the 32 KiB window), discard output up to the
 * record and take it. All per-read state lives in the call, so concurrent
 * reads on one shard are safe.
 *
 * Does not: decode protobufs, cache anything, or know about threads/FUSE.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "record.h"

#include "crc32c.h"
#include "fdcache.h"
#include "fetch.h"
#include "index.h"
#include "mapguard.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#define HDR_LEN 12
#define FOOT_LEN 4
#define SCAN_CHUNK ((size_t)1 << 20) /* initial scan buffer, uncompressed */
#define SCAN_IN_CHUNK ((size_t)256 << 10) /* compressed input per pread, scan */
#define SCAN_AHEAD ((off_t)4 << 20) /* plain scan: asked for ahead of the chunk read */
#define READ_IN_CHUNK ((size_t)64 << 10) /* compressed input per pread, read */
#define DISCARD_CHUNK ((size_t)32 << 10) /* output skipped on the way to a record */
#define SEEK_SPAN ((uint64_t)1 << 20) /* uncompressed bytes between seek points */
/* A length whose CRC fails is tried (its data's CRC may confirm it) only
 * up to this many bytes. */
#define SCAN_TRUST_MAX ((uint64_t)64 << 20)

/* The seek point span; BATCHFS_SEEK_SPAN=BYTES (at least 64 KiB) sets it,
 * for measuring denser seek points against shadow copies (scripts/bench). */
static uint64_t seek_span(void)
{
	static _Atomic uint64_t span;
	uint64_t v = atomic_load(&span);

	if (!v) {
		const char *e = getenv("BATCHFS_SEEK_SPAN");
		unsigned long long n = e ? strtoull(e, NULL, 10) : 0;

		v = n >= ((uint64_t)64 << 10) ? (uint64_t)n : SEEK_SPAN;
		atomic_store(&span, v);
	}
	return v;
}
#define WINSIZE 32768

struct bfs_shard {
	struct bfs_fdslot
		fs; /* the descriptor, through the LRU cache: use fs.fd only while pinned */
	char *path;
	char *open_path; /* path made absolute: the daemon reopens shards after chdir("/") */
	enum bfs_compression comp;
	uint64_t file_size;
	int64_t mtime_ns;
	struct bfs_index *ix; /* the record index (index.h), or NULL before a scan */
	uint64_t nlocs; /* records indexed: ix->n once the index is finished */
	const struct bfs_seek_point *pts; /* ix's seek points */
	size_t npts;
	const uint8_t *map; /* plain shards: the file mapped read-only (file_size bytes), or NULL */
	bfs_bad_record_fn bad_fn; /* see bfs_shard_set_bad_fn */
	void *bad_ctx;
	/* shadow.c's hooks (see record.h): the scan's output sink, and a plain
	 * view of the stream that reads go to first */
	bfs_stream_sink_fn sink;
	void *sink_ctx;
	/* owned; set while reads run only by bfs_shard_promote (an atomic
	 * store after the fail function: a reader sees a view whole) */
	struct bfs_shard *_Atomic shadow;
	bfs_shadow_fail_fn shadow_fail;
	void *shadow_ctx;
	bool ix_borrowed; /* a view: ix belongs to the shard it shadows */
	bool remote; /* on a network or FUSE filesystem, or not a file: never mapped */
	/* a shard that is not a local file (an object in a bucket): its bytes
	 * come through io with obj, and fs holds no descriptor */
	const struct bfs_shard_io *io;
	void *io_obj;
	/* the I/O stage reads of this shard go through (fetch.h), as object
	 * fetch_id; NULL: reads go to the file */
	struct bfs_fetch *fetch;
	uint32_t fetch_id;
	bool cut; /* the last scan stopped at a record cut short (bfs_shard_cut) */
};

static atomic_long nmapped; /* shards mapped now (see maybe_map) */

void bfs_shard_set_bad_fn(struct bfs_shard *s, bfs_bad_record_fn fn, void *ctx)
{
	s->bad_fn = fn;
	s->bad_ctx = ctx;
}

/* ---- small helpers ---------------------------------------------------- */

static inline uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint32_t masked_crc(const uint8_t *p, size_t n)
{
	return bfs_crc32c_mask(bfs_crc32c(0, p, n));
}

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

static const char *stream_name(enum bfs_compression c)
{
	return c == BFS_COMP_ZLIB ? "zlib stream" : "gzip stream";
}

static int wrap_bits(enum bfs_compression c)
{
	return c == BFS_COMP_ZLIB ? 15 : 15 + 16;
}

static unsigned trailer_len(enum bfs_compression c)
{
	return c == BFS_COMP_ZLIB ? 4 : 8;
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
static int shard_pin(struct bfs_shard *s)
{
	return s->io ? 0 : bfs_fdslot_pin(&s->fs);
}

static void shard_unpin(struct bfs_shard *s)
{
	if (!s->io)
		bfs_fdslot_unpin(&s->fs);
}

/* n bytes at off (pinned): bytes read, fewer only at the end, or -errno
 * (io: with its message set). */
static ssize_t shard_pread(const struct bfs_shard *s, void *buf, size_t n, uint64_t off)
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
static ssize_t shard_preadv(const struct bfs_shard *s, const struct iovec *v, int nv, uint64_t off)
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
	n = shard_pread(s, tmp, total, off);
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
static const char *read_why(const struct bfs_shard *s, ssize_t n, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s", s->io && bfs_err_msg()[0] ? bfs_err_msg() : strerror((int)-n));
	return buf;
}

/* ---- open / close ------------------------------------------------------ */

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
	n = shard_pread(s, b, sizeof(b), 0);
	if (n < 0)
		return bfs_err_set((int)n, "read: %s", read_why(s, n, why, sizeof(why)));
	if (n == HDR_LEN && masked_crc(b, 8) == get_le32(b + 8)) {
		*out = BFS_COMP_NONE;
		return 0;
	}
	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
		*out = BFS_COMP_GZIP;
		return 0;
	}
	if (n >= 2 && (b[0] & 0x0f) == 8 && (b[0] >> 4) <= 7 && ((b[0] << 8) | b[1]) % 31 == 0) {
		*out = BFS_COMP_ZLIB;
		return 0;
	}
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
		err = shard_pin(s);
		if (err)
			return err;
		err = detect(s, &c);
		shard_unpin(s);
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

/* Record i < nlocs as an offset and a length. */
static inline struct bfs_record_loc loc_of(const struct bfs_shard *s, uint64_t i)
{
	return (struct bfs_record_loc){ bfs_index_offset(s->ix, i), bfs_index_len(s->ix, i) };
}

size_t bfs_shard_nseek(const struct bfs_shard *s)
{
	return s->npts;
}

const struct bfs_seek_point *bfs_shard_seek_points(const struct bfs_shard *s)
{
	return s->pts;
}

/* ---- the I/O stage ------------------------------------------------------ */

bool bfs_shard_is_remote(const struct bfs_shard *s)
{
	return s->remote;
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

static const struct bfs_seek_point *find_point(const struct bfs_shard *s, uint64_t off);
static const struct bfs_seek_point *point_after(const struct bfs_shard *s, uint64_t off);

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
 * holds them, else read. Bytes read or a negative errno. */
static ssize_t src_pread(const struct bfs_shard *s, void *buf, size_t n, uint64_t off)
{
	if (s->fetch) {
		struct iovec v = { buf, n };
		int rc = bfs_fetch_copyv(s->fetch, s->fetch_id, off, &v, 1);

		if (rc == 0)
			return (ssize_t)n;
		if (rc != -ENODATA)
			return rc;
	}
	return shard_pread(s, buf, n, off);
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

static void maybe_map(struct bfs_shard *s)
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
static void drop_shadow(struct bfs_shard *s)
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
	drop_shadow(s);
	bfs_index_free(s->ix);
	s->ix = ix;
	s->nlocs = ix->n;
	s->pts = ix->pts;
	s->npts = ix->npts;
	maybe_map(s);
	return 0;
}

/* ---- compressed input -------------------------------------------------- */

struct zin {
	const struct bfs_shard *s; /* read with src_pread: the I/O stage first */
	uint64_t file_size;
	uint64_t pos; /* file offset of the next byte to pread */
	uint8_t *buf;
	size_t cap;
	z_stream zs;
	bool live; /* zs initialised */
};

/* offset of the next compressed byte inflate will consume */
static inline uint64_t zin_off(const struct zin *z)
{
	return z->pos - z->zs.avail_in;
}

/* Refill the input if inflate consumed it all. Leaves avail_in 0 at end of file. */
static int zin_refill(struct zin *z)
{
	ssize_t n;
	size_t want;

	if (z->zs.avail_in || z->pos >= z->file_size)
		return 0;
	want = z->cap;
	if (z->file_size - z->pos < want)
		want = (size_t)(z->file_size - z->pos);
	n = src_pread(z->s, z->buf, want, z->pos);
	if (n < 0) {
		char why[512];

		snprintf(why, sizeof(why), "%s",
			 (z->s->fetch || z->s->io) && bfs_err_msg()[0] ? bfs_err_msg()
								       : strerror((int)-n));
		return bfs_err_set((int)n, "read at compressed offset %" PRIu64 ": %s", z->pos,
				   why);
	}
	if ((size_t)n < want)
		z->file_size = z->pos + (uint64_t)n; /* shrank under us: treat as end */
	z->pos += (uint64_t)n;
	z->zs.next_in = z->buf;
	z->zs.avail_in = (uInt)n;
	return 0;
}

static int zin_init(struct zin *z, const struct bfs_shard *s, size_t cap)
{
	memset(z, 0, sizeof(*z));
	z->s = s;
	z->file_size = s->file_size;
	z->cap = cap;
	z->buf = malloc(cap);
	if (!z->buf)
		return bfs_err_set(-ENOMEM, "out of memory");
	return 0;
}

static void zin_destroy(struct zin *z)
{
	if (z->live)
		inflateEnd(&z->zs);
	z->live = false;
	free(z->buf);
	z->buf = NULL;
}

static int zin_inflate_init(struct zin *z, int window_bits)
{
	int ret = inflateInit2(&z->zs, window_bits);

	if (ret == Z_MEM_ERROR)
		return bfs_err_set(-ENOMEM, "out of memory (inflate)");
	if (ret != Z_OK)
		return bfs_err_set(-EIO, "inflateInit2 failed (%d)", ret);
	z->live = true;
	return 0;
}

/* ---- scan -------------------------------------------------------------- */

struct scan {
	struct bfs_shard *s;
	uint8_t *buf;
	size_t cap, start, end; /* buf[start..end) holds stream bytes base.. */
	uint64_t base;
	uint64_t produced; /* stream offset of buf[end] */
	bool eof;
	uint64_t rec; /* record being read, for messages */
	struct zin z;
	uint64_t last_point;
	bool z_ended; /* the compressed input ended inside its stream */
};

static int scan_fill_plain(struct scan *sc)
{
	size_t want = sc->cap - sc->end;
	ssize_t n;

	/* the shard is the file as it was at open: ignore anything appended */
	if (sc->s->file_size - sc->produced < want)
		want = (size_t)(sc->s->file_size - sc->produced);
	/* the next chunks on their way while this one is parsed: a scan is
	 * CPU-bound on small records, and reads then overlap it */
	if (want && sc->s->file_size - sc->produced > want && !sc->s->io)
		(void)posix_fadvise(sc->s->fs.fd, (off_t)(sc->produced + want), SCAN_AHEAD,
				    POSIX_FADV_WILLNEED);
	n = want ? shard_pread(sc->s, sc->buf + sc->end, want, sc->produced) : 0;

	if (n < 0) {
		char why[512];

		return bfs_err_set((int)n, "record %" PRIu64 " at offset %" PRIu64 ": read: %s",
				   sc->rec, sc->base, read_why(sc->s, n, why, sizeof(why)));
	}
	if (n == 0)
		sc->eof = true;
	sc->end += (size_t)n;
	sc->produced += (uint64_t)n;
	return 0;
}

static int scan_add_point(struct scan *sc)
{
	struct bfs_seek_point *p = bfs_index_add_point(sc->s->ix);
	uInt wl = 0;

	if (!p)
		return bfs_err_set(-ENOMEM, "out of memory growing the seek points");
	p->out_off = sc->produced;
	p->in_off = zin_off(&sc->z);
	p->bits = (uint8_t)(sc->z.zs.data_type & 7);
	p->new_member = 0;
	if (inflateGetDictionary(&sc->z.zs, NULL, &wl) != Z_OK || wl > WINSIZE) {
		bfs_index_drop_point(sc->s->ix);
		return bfs_err_set(-EIO, "inflateGetDictionary failed");
	}
	memset(p->window, 0, WINSIZE - wl);
	inflateGetDictionary(&sc->z.zs, p->window + WINSIZE - wl, &wl);
	sc->last_point = sc->produced;
	return 0;
}

static int scan_zerr(struct scan *sc, int err, const char *what)
{
	return bfs_err_set(err,
			   "record %" PRIu64 " at offset %" PRIu64
			   ": %s: %s at compressed offset %" PRIu64 "%s%s%s",
			   sc->rec, sc->base, stream_name(sc->s->comp), what, zin_off(&sc->z),
			   sc->z.zs.msg ? " (zlib: " : "", sc->z.zs.msg ? sc->z.zs.msg : "",
			   sc->z.zs.msg ? ")" : "");
}

/* Inflate until some output was produced or the stream ended. */
static int scan_fill_z(struct scan *sc)
{
	z_stream *zs = &sc->z.zs;
	int err;

	for (;;) {
		size_t room = sc->cap - sc->end;
		size_t got;
		int ret;

		err = zin_refill(&sc->z);
		if (err)
			return err;
		if (room > UINT_MAX)
			room = UINT_MAX;
		zs->next_out = sc->buf + sc->end;
		zs->avail_out = (uInt)room;
		ret = inflate(zs, Z_BLOCK);
		got = room - zs->avail_out;
		if (got && sc->s->sink)
			sc->s->sink(sc->s->sink_ctx, sc->buf + sc->end, got);
		sc->end += got;
		sc->produced += got;
		switch (ret) {
		case Z_OK:
			break;
		case Z_STREAM_END:
			err = zin_refill(&sc->z);
			if (err)
				return err;
			if (!zs->avail_in) {
				sc->eof = true;
				return 0;
			}
			inflateReset(zs); /* another member follows */
			if (got)
				return 0;
			continue;
		case Z_BUF_ERROR:
			/* no progress: input exhausted (room is never 0 here) */
			sc->z_ended = true;
			return scan_zerr(sc, -EBADMSG,
					 "unexpected end of compressed data (truncated file?)");
		case Z_NEED_DICT:
			return scan_zerr(sc, -EBADMSG, "stream needs a preset dictionary");
		case Z_MEM_ERROR:
			return bfs_err_set(-ENOMEM, "out of memory (inflate)");
		default:
			return scan_zerr(sc, -EBADMSG, "invalid deflate data");
		}
		if ((zs->data_type & 128) && !(zs->data_type & 64) &&
		    sc->produced - sc->last_point >= seek_span()) {
			err = scan_add_point(sc);
			if (err)
				return err;
		}
		if (got)
			return 0;
	}
}

/* Make at least n bytes available at buf+start, unless the stream ends first.
 * Returns the bytes available (>= n, or fewer at end) or -errno. */
static int64_t scan_need(struct scan *sc, size_t n)
{
	while (sc->end - sc->start < n && !sc->eof) {
		int err;

		if (sc->start && (sc->end == sc->cap || sc->cap - sc->start < n)) {
			memmove(sc->buf, sc->buf + sc->start, sc->end - sc->start);
			sc->end -= sc->start;
			sc->start = 0;
		}
		if (sc->end == sc->cap) {
			/* grow by doubling, never past n: memory follows real data */
			size_t ncap;
			uint8_t *p;

			if (__builtin_mul_overflow(sc->cap, 2, &ncap))
				ncap = n;
			if (ncap > n)
				ncap = n;
			p = realloc(sc->buf, ncap);
			if (!p)
				return bfs_err_set(-ENOMEM,
						   "record %" PRIu64 " at offset %" PRIu64
						   ": out of memory (%zu bytes)",
						   sc->rec, sc->base, ncap);
			sc->buf = p;
			sc->cap = ncap;
		}
		err = sc->s->comp == BFS_COMP_NONE ? scan_fill_plain(sc) : scan_fill_z(sc);
		if (err)
			return err;
	}
	return (int64_t)(sc->end - sc->start);
}

int bfs_shard_scan(struct bfs_shard *s, bool verify, bfs_record_fn fn, void *ctx)
{
	struct scan sc;
	bool plain = s->comp == BFS_COMP_NONE;
	int err = 0;

	memset(&sc, 0, sizeof(sc));
	sc.s = s;
	s->cut = false;
	drop_shadow(s); /* it borrows the index */
	bfs_index_free(s->ix);
	s->ix = NULL;
	s->nlocs = 0;
	s->pts = NULL;
	s->npts = 0;
	err = bfs_index_new(&s->ix);
	if (err)
		return err;
	sc.cap = SCAN_CHUNK;
	sc.buf = malloc(sc.cap);
	if (!sc.buf)
		return bfs_err_set(-ENOMEM, "out of memory");
	err = shard_pin(s);
	if (err) {
		free(sc.buf);
		return err;
	}
	if (s->io && s->io->stream_begin)
		s->io->stream_begin(s->io_obj, 0); /* one pass, in order: read ahead */
	if (!plain) {
		err = zin_init(&sc.z, s, SCAN_IN_CHUNK);
		if (err)
			goto out;
		err = zin_inflate_init(&sc.z, wrap_bits(s->comp));
		if (err)
			goto out;
	}

	for (sc.rec = 0;; sc.rec++) {
		uint64_t off = sc.base;
		const uint8_t *p;
		uint64_t len;
		size_t total;
		int64_t have;
		uint32_t stored, calc;
		char bad_len[160] = ""; /* a length CRC mismatch, while its data decides */

		have = scan_need(&sc, HDR_LEN);
		if (have < 0) {
			err = (int)have;
			s->cut = sc.z_ended;
			goto out;
		}
		if (have == 0)
			break; /* clean end at a record boundary */
#define REC_ERR(e, fmt, ...)                                                                       \
	bfs_err_set(e, "record %" PRIu64 " at offset %" PRIu64 ": " fmt, sc.rec, off, __VA_ARGS__)
		if (have < 8) {
			err = REC_ERR(-EBADMSG, "truncated length (%" PRId64 " of 8 bytes)", have);
			s->cut = true;
			goto out;
		}
		if (have < HDR_LEN) {
			err = REC_ERR(-EBADMSG, "truncated length CRC (%" PRId64 " of 4 bytes)",
				      have - 8);
			s->cut = true;
			goto out;
		}
		p = sc.buf + sc.start;
		len = bfs_get_le64(p);
		stored = get_le32(p + 8);
		if (verify && (calc = masked_crc(p, 8)) != stored) {
			err = REC_ERR(-EBADMSG,
				      "length CRC mismatch (stored 0x%08" PRIx32
				      ", computed 0x%08" PRIx32 ")",
				      stored, calc);
			/* the length may still be right (its CRC was hit): the
			 * data's CRC at that length says so below. A length too
			 * large to try is not believed. */
			if (!s->bad_fn || len > SCAN_TRUST_MAX ||
			    (plain && len > s->file_size - off - HDR_LEN))
				goto out;
			snprintf(bad_len, sizeof(bad_len), "%s", bfs_err_msg());
		}
		if (len > BFS_RECORD_MAX_LEN) {
			err = REC_ERR(-EFBIG, "declared length %" PRIu64 " exceeds limit %" PRIu64,
				      len, (uint64_t)BFS_RECORD_MAX_LEN);
			goto out;
		}
		if (plain) {
			/* check against the file before allocating anything */
			uint64_t left =
				s->file_size > off + HDR_LEN ? s->file_size - off - HDR_LEN : 0;
			if (len > left) {
				err = REC_ERR(-EBADMSG,
					      "truncated data (declared %" PRIu64 " bytes, %" PRIu64
					      " left)",
					      len, left);
				s->cut = true;
				goto out;
			}
		}
		total = HDR_LEN + (size_t)len + FOOT_LEN;
		have = scan_need(&sc, total);
		if (have >= 0 && (uint64_t)have < HDR_LEN + len)
			err = REC_ERR(-EBADMSG,
				      "truncated data (declared %" PRIu64 " bytes, %" PRId64
				      " left)",
				      len, have - HDR_LEN);
		else if (have >= 0 && (size_t)have < total)
			err = REC_ERR(-EBADMSG, "truncated data CRC (%" PRIu64 " of 4 bytes)",
				      (uint64_t)have - HDR_LEN - len);
		else if (have < 0)
			err = (int)have;
		if (have < 0 || (size_t)have < total) {
			/* the stream ends inside the record, unless its length
			 * was wrong */
			s->cut = (have >= 0 || sc.z_ended) && !bad_len[0];
			if (bad_len[0] && err != -ENOMEM)
				err = bfs_err_set(-EBADMSG, "%s", bad_len);
			goto out;
		}
		p = sc.buf + sc.start;
		stored = get_le32(p + HDR_LEN + len);
		if (verify && (calc = masked_crc(p + HDR_LEN, (size_t)len)) != stored) {
			err = REC_ERR(-EBADMSG,
				      "data CRC mismatch (stored 0x%08" PRIx32
				      ", computed 0x%08" PRIx32 ")",
				      stored, calc);
			if (bad_len[0]) /* no sign that the length is right */
				err = bfs_err_set(-EBADMSG, "%s", bad_len);
			if (!s->bad_fn || bad_len[0])
				goto out;
		}
		if (err) {
			/* the framing holds (a data CRC over its declared length,
			 * or a length CRC hit where the data's CRC confirms the
			 * length): index it, report it, go on */
			err = bfs_index_push(s->ix, off, (uint32_t)len);
			if (err)
				goto out;
			if (bad_len[0])
				(void)bfs_err_set(-EBADMSG, "%s", bad_len);
			s->bad_fn(s->bad_ctx, sc.rec, off, bfs_err_msg());
			sc.start += total;
			sc.base += total;
			continue;
		}
#undef REC_ERR
		err = bfs_index_push(s->ix, off, (uint32_t)len);
		if (err)
			goto out;
		if (fn) {
			err = fn(ctx, sc.rec, off, p + HDR_LEN, (uint32_t)len);
			if (err)
				goto out;
		}
		sc.start += total;
		sc.base += total;
	}
out:
	if (!plain)
		zin_destroy(&sc.z);
	free(sc.buf);
	{
		/* records before an error stay indexed */
		int ferr = bfs_index_finish(s->ix);

		if (!err)
			err = ferr;
		if (!ferr) {
			s->nlocs = s->ix->n;
			s->pts = s->ix->pts;
			s->npts = s->ix->npts;
		}
	}
	if (!err || s->cut)
		maybe_map(s);
	if (s->io && s->io->stream_end)
		s->io->stream_end(s->io_obj);
	shard_unpin(s);
	return err;
}

bool bfs_shard_cut(const struct bfs_shard *s)
{
	return s->cut;
}

/* ---- random access ----------------------------------------------------- */

static int check_header(uint64_t i, const struct bfs_record_loc *loc, const uint8_t *hdr,
			bool verify)
{
	uint64_t len = bfs_get_le64(hdr);
	uint32_t stored = get_le32(hdr + 8), calc;

	if (verify && (calc = masked_crc(hdr, 8)) != stored)
		return bfs_err_set(-EBADMSG,
				   "record %" PRIu64 " at offset %" PRIu64
				   ": length CRC mismatch (stored 0x%08" PRIx32
				   ", computed 0x%08" PRIx32 ")",
				   i, loc->offset, stored, calc);
	if (len != loc->len)
		return bfs_err_set(-EBADMSG,
				   "record %" PRIu64 " at offset %" PRIu64 ": length %" PRIu64
				   " differs from the index (%" PRIu32 "); file changed?",
				   i, loc->offset, len, loc->len);
	return 0;
}

static int check_data(uint64_t i, const struct bfs_record_loc *loc, const uint8_t *data,
		      const uint8_t *foot)
{
	uint32_t stored = get_le32(foot);
	uint32_t calc = masked_crc(data, loc->len);

	if (calc != stored)
		return bfs_err_set(-EBADMSG,
				   "record %" PRIu64 " at offset %" PRIu64
				   ": data CRC mismatch (stored 0x%08" PRIx32
				   ", computed 0x%08" PRIx32 ")",
				   i, loc->offset, stored, calc);
	return 0;
}

/* Whether record loc (header, data, footer) lies within the first `size`
 * bytes of its file. */
static bool fits(const struct bfs_record_loc *loc, uint64_t size)
{
	return loc->offset <= size && HDR_LEN + (uint64_t)loc->len + FOOT_LEN <= size - loc->offset;
}

/* Whether record loc can be copied out of the shard's mapping. */
static bool mapped(const struct bfs_shard *s, const struct bfs_record_loc *loc)
{
	return s->map && fits(loc, s->file_size);
}

/* Random records miss the caches and the TLB: load the first cache lines
 * of every mapped record of a batch first, so that the misses overlap
 * (prefetch hints were measured to do nothing here: they are dropped on a
 * TLB miss). A fault is left for the copies to report. */
static void touch_records(const struct bfs_shard *s, const uint64_t *idx, size_t n)
{
	enum { BLOCK = 64, LINES = 4 };
	const void *addr[BLOCK * LINES];
	size_t m = 0;

	if (!s->map)
		return;
	for (size_t k = 0; k < n; k++) {
		struct bfs_record_loc loc;
		uint64_t end;

		if (idx[k] >= s->nlocs)
			continue;
		loc = loc_of(s, idx[k]);
		if (!mapped(s, &loc))
			continue;
		end = loc.offset + HDR_LEN + loc.len + FOOT_LEN;
		for (uint64_t a = loc.offset, l = 0; a < end && l < LINES; a = (a | 63) + 1, l++)
			addr[m++] = s->map + a;
		if (m > (BLOCK - 1) * LINES) {
			(void)bfs_mapguard_touch(addr, m);
			m = 0;
		}
	}
	if (m)
		(void)bfs_mapguard_touch(addr, m);
}

/* Copy record i's header, data and footer out of the mapping. */
static int map_copy(const struct bfs_shard *s, uint64_t i, const struct bfs_record_loc *loc,
		    uint8_t *hdr, uint8_t *dst, uint8_t *foot)
{
	const uint8_t *src = s->map + loc->offset;

	if (bfs_mapguard_copy(hdr, src, HDR_LEN) != 0 ||
	    bfs_mapguard_copy(dst, src + HDR_LEN, loc->len) != 0 ||
	    bfs_mapguard_copy(foot, src + HDR_LEN + loc->len, FOOT_LEN) != 0)
		return bfs_err_set(-EIO,
				   "record %" PRIu64 " at offset %" PRIu64
				   ": bus error reading the mapped file; file truncated?",
				   i, loc->offset);
	return 0;
}

/* After copies out of the mapping: the bytes past a shrunk file's end read
 * as zeros in its last page (past that page, the guard turns the fault into
 * -EIO), so a copy is good only if the file still holds the record after
 * it. One fstat checks every record of a batch. */
static uint64_t current_size(const struct bfs_shard *s)
{
	struct stat st;

	return fstat(s->fs.fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static int truncated(uint64_t i, const struct bfs_record_loc *loc)
{
	return bfs_err_set(-EIO,
			   "record %" PRIu64 " at offset %" PRIu64 ": short read; file truncated?",
			   i, loc->offset);
}

/* Record i from the mapping, checked like read_plain; the caller checks
 * the size afterwards. */
static int read_mapped(const struct bfs_shard *s, uint64_t i, const struct bfs_record_loc *loc,
		       uint8_t *dst, bool verify)
{
	uint8_t hdr[HDR_LEN], foot[FOOT_LEN];
	int err = map_copy(s, i, loc, hdr, dst, foot);

	if (!err)
		err = check_header(i, loc, hdr, verify);
	if (!err && verify)
		err = check_data(i, loc, dst, foot);
	return err;
}

/* Record i out of the I/O stage, checked like read_plain: -ENODATA when
 * the stage does not hold its bytes (read it from the file). */
static int read_staged(struct bfs_shard *s, uint64_t i, const struct bfs_record_loc *loc,
		       uint8_t *dst, bool verify)
{
	uint8_t hdr[HDR_LEN], foot[FOOT_LEN];
	struct iovec iov[3] = {
		{ hdr, HDR_LEN },
		{ dst, loc->len },
		{ foot, FOOT_LEN },
	};
	int err = bfs_fetch_copyv(s->fetch, s->fetch_id, loc->offset, iov, 3);

	if (err == -ENODATA)
		return err;
	if (err) {
		char why[512];

		snprintf(why, sizeof(why), "%s", bfs_err_msg());
		return bfs_err_set(err, "record %" PRIu64 " at offset %" PRIu64 ": read: %s", i,
				   loc->offset, why[0] ? why : strerror(-err));
	}
	err = check_header(i, loc, hdr, verify);
	if (!err && verify)
		err = check_data(i, loc, dst, foot);
	return err;
}

static int read_plain(struct bfs_shard *s, uint64_t i, const struct bfs_record_loc *loc,
		      uint8_t *dst, bool verify)
{
	uint8_t hdr[HDR_LEN], foot[FOOT_LEN];
	struct iovec iov[3] = {
		{ hdr, HDR_LEN },
		{ dst, loc->len },
		{ foot, FOOT_LEN },
	};
	size_t want = HDR_LEN + (size_t)loc->len + FOOT_LEN;
	size_t got = 0;
	int err;

	if (s->fetch && (err = read_staged(s, i, loc, dst, verify)) != -ENODATA)
		return err;
	if (mapped(s, loc)) {
		err = map_copy(s, i, loc, hdr, dst, foot);
		if (!err && !fits(loc, current_size(s)))
			err = truncated(i, loc);
		if (err)
			return err;
		got = want;
	}
	while (got < want) {
		ssize_t n;
		int k = 0;
		size_t skip = got;
		struct iovec v[3];

		/* the iovecs still to fill */
		for (int j = 0; j < 3; j++) {
			if (skip >= iov[j].iov_len) {
				skip -= iov[j].iov_len;
				continue;
			}
			v[k].iov_base = (uint8_t *)iov[j].iov_base + skip;
			v[k].iov_len = iov[j].iov_len - skip;
			skip = 0;
			k++;
		}
		n = shard_preadv(s, v, k, loc->offset + got);
		if (n < 0) {
			char why[512];

			return bfs_err_set((int)n,
					   "record %" PRIu64 " at offset %" PRIu64 ": read: %s", i,
					   loc->offset, read_why(s, n, why, sizeof(why)));
		}
		if (n == 0)
			return bfs_err_set(-EIO,
					   "record %" PRIu64 " at offset %" PRIu64
					   ": short read (%zu of %zu bytes); file truncated?",
					   i, loc->offset, got, want);
		got += (size_t)n;
	}
	err = check_header(i, loc, hdr, verify);
	if (err)
		return err;
	return verify ? check_data(i, loc, dst, foot) : 0;
}

struct zreader {
	const struct bfs_shard *s;
	struct zin z;
	bool raw; /* started mid-member: the trailer is skipped by hand */
	uint8_t *scratch;
	uint64_t rec, rec_off;
};

static int zr_err(struct zreader *r, int err, const char *what)
{
	return bfs_err_set(err,
			   "record %" PRIu64 " at offset %" PRIu64
			   ": %s: %s at compressed offset %" PRIu64 "%s%s%s",
			   r->rec, r->rec_off, stream_name(r->s->comp), what, zin_off(&r->z),
			   r->z.zs.msg ? " (zlib: " : "", r->z.zs.msg ? r->z.zs.msg : "",
			   r->z.zs.msg ? ")" : "");
}

/* zin_refill for a record's read: a failure names the record. */
static int zr_refill(struct zreader *r)
{
	int err = zin_refill(&r->z);

	if (err)
		bfs_err_prefix("record %" PRIu64 " at offset %" PRIu64, r->rec, r->rec_off);
	return err;
}

static int zr_start(struct zreader *r, const struct bfs_seek_point *pt)
{
	int err;

	r->z.pos = pt ? pt->in_off : 0;
	if (pt && !pt->new_member) {
		int ret;

		err = zin_inflate_init(&r->z, -15);
		if (err)
			return err;
		r->raw = true;
		if (pt->bits) {
			uint8_t b;
			ssize_t n = src_pread(r->s, &b, 1, pt->in_off - 1);

			if (n != 1)
				return zr_err(r, n < 0 ? (int)n : -EIO,
					      "cannot read seek point byte");
			ret = inflatePrime(&r->z.zs, pt->bits, b >> (8 - pt->bits));
			if (ret != Z_OK)
				return zr_err(r, -EBADMSG, "bad seek point");
		}
		ret = inflateSetDictionary(&r->z.zs, pt->window, WINSIZE);
		if (ret != Z_OK)
			return zr_err(r, -EBADMSG, "bad seek point window");
		return 0;
	}
	r->raw = false;
	return zin_inflate_init(&r->z, wrap_bits(r->s->comp));
}

/* A member ended: skip its trailer if inflate did not, start the next one. */
static int zr_next_member(struct zreader *r)
{
	int err;

	if (r->raw) {
		unsigned left = trailer_len(r->s->comp);

		while (left) {
			unsigned k;

			err = zr_refill(r);
			if (err)
				return err;
			if (!r->z.zs.avail_in)
				return zr_err(r, -EBADMSG, "truncated member trailer");
			k = r->z.zs.avail_in < left ? r->z.zs.avail_in : left;
			r->z.zs.next_in += k;
			r->z.zs.avail_in -= k;
			left -= k;
		}
	}
	err = zr_refill(r);
	if (err)
		return err;
	if (!r->z.zs.avail_in)
		return zr_err(r, -EBADMSG, "stream ends before the record");
	if (inflateReset2(&r->z.zs, wrap_bits(r->s->comp)) != Z_OK)
		return zr_err(r, -EIO, "inflateReset2 failed");
	r->raw = false;
	return 0;
}

/* Inflate exactly n bytes into dst, or discard them when dst is NULL. */
static int zr_read(struct zreader *r, uint8_t *dst, size_t n)
{
	z_stream *zs = &r->z.zs;
	int err;

	while (n) {
		size_t want = n;
		uint8_t *o = dst;
		size_t got;
		int ret;

		if (!dst) {
			o = r->scratch;
			if (want > DISCARD_CHUNK)
				want = DISCARD_CHUNK;
		} else if (want > UINT_MAX) {
			want = UINT_MAX;
		}
		err = zr_refill(r);
		if (err)
			return err;
		zs->next_out = o;
		zs->avail_out = (uInt)want;
		ret = inflate(zs, Z_NO_FLUSH);
		got = want - zs->avail_out;
		n -= got;
		if (dst)
			dst += got;
		if (!n && ret != Z_MEM_ERROR)
			break; /* what we need was produced; a later error is not ours */
		switch (ret) {
		case Z_OK:
			break;
		case Z_STREAM_END:
			err = zr_next_member(r);
			if (err)
				return err;
			break;
		case Z_BUF_ERROR:
			return zr_err(r, -EBADMSG, "unexpected end of compressed data");
		case Z_NEED_DICT:
			return zr_err(r, -EBADMSG, "stream needs a preset dictionary");
		case Z_MEM_ERROR:
			return bfs_err_set(-ENOMEM, "out of memory (inflate)");
		default:
			return zr_err(r, -EBADMSG, "invalid deflate data");
		}
	}
	return 0;
}

/* The last seek point at or before `off`, or NULL for the stream start. */
static const struct bfs_seek_point *find_point(const struct bfs_shard *s, uint64_t off)
{
	size_t lo = 0, hi = s->npts;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->pts[mid].out_off <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &s->pts[lo - 1] : NULL;
}

/* The first seek point after off, or NULL. */
static const struct bfs_seek_point *point_after(const struct bfs_shard *s, uint64_t off)
{
	size_t lo = 0, hi = s->npts;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->pts[mid].out_off <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->npts ? &s->pts[lo] : NULL;
}

static int read_z(struct bfs_shard *s, uint64_t i, const struct bfs_record_loc *loc, uint8_t *dst,
		  bool verify)
{
	const struct bfs_seek_point *pt = find_point(s, loc->offset);
	struct zreader r;
	uint8_t hdr[HDR_LEN], foot[FOOT_LEN];
	int err;

	memset(&r, 0, sizeof(r));
	r.s = s;
	r.rec = i;
	r.rec_off = loc->offset;
	err = zin_init(&r.z, s, READ_IN_CHUNK);
	if (err)
		return err;
	r.scratch = malloc(DISCARD_CHUNK);
	if (!r.scratch) {
		err = bfs_err_set(-ENOMEM, "out of memory");
		goto out;
	}
	err = zr_start(&r, pt);
	if (err)
		goto out;
	err = zr_read(&r, NULL, loc->offset - (pt ? pt->out_off : 0));
	if (err)
		goto out;
	err = zr_read(&r, hdr, HDR_LEN);
	if (err)
		goto out;
	err = check_header(i, loc, hdr, verify);
	if (err)
		goto out;
	err = zr_read(&r, dst, loc->len);
	if (err)
		goto out;
	err = zr_read(&r, foot, FOOT_LEN);
	if (err)
		goto out;
	if (verify)
		err = check_data(i, loc, dst, foot);
out:
	free(r.scratch);
	zin_destroy(&r.z);
	return err;
}

/* ---- the shadow: a plain copy of a compressed shard's stream ------------ */

/* Record i from the shadow, both CRCs checked whatever the caller's verify
 * (the copy is ours, not the user's data: a bad byte in it must not reach a
 * batch). Returns 0, or the shadow's error with its message in *msg
 * (malloc'd, or NULL): the caller then reads the compressed shard. */
static int shadow_read(struct bfs_shard *s, uint64_t i, uint8_t *dst, size_t dst_cap, char **msg)
{
	int err = bfs_shard_read(s->shadow, i, dst, dst_cap, true);

	*msg = err ? strdup(bfs_err_msg()) : NULL;
	return err;
}

/* The shadow failed a record the compressed shard gave: the copy is bad. */
static void shadow_failed(struct bfs_shard *s, const char *msg)
{
	if (s->shadow_fail)
		s->shadow_fail(s->shadow_ctx, s, msg ? msg : "read failed");
}

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
	maybe_map(v);
	*out = v;
	return 0;
}

bool bfs_shard_promote(struct bfs_shard *s, struct bfs_shard *view, bfs_shadow_fail_fn fn,
		       void *ctx)
{
	struct bfs_shard *none = NULL;

	if (atomic_load(&s->shadow))
		return false;
	s->shadow_fail = fn;
	s->shadow_ctx = ctx;
	return atomic_compare_exchange_strong(&s->shadow, &none, view);
}

void bfs_shard_set_shadow(struct bfs_shard *s, struct bfs_shard *view, bfs_shadow_fail_fn fn,
			  void *ctx)
{
	drop_shadow(s);
	s->shadow = view;
	s->shadow_fail = fn;
	s->shadow_ctx = ctx;
}

bool bfs_shard_has_shadow(const struct bfs_shard *s)
{
	return s->shadow != NULL;
}

/* bfs_shard_read with the descriptor pinned. */
static int read_one(struct bfs_shard *s, uint64_t i, uint8_t *dst, size_t dst_cap, bool verify)
{
	struct bfs_record_loc loc;

	if (i >= s->nlocs)
		return bfs_err_set(-ENOENT,
				   "record %" PRIu64 ": no such record (%" PRIu64 " indexed)", i,
				   s->nlocs);
	loc = loc_of(s, i);
	if (loc.len > dst_cap)
		return bfs_err_set(-EFBIG,
				   "record %" PRIu64 " at offset %" PRIu64 ": %" PRIu32
				   " bytes do not fit in a %zu-byte buffer",
				   i, loc.offset, loc.len, dst_cap);
	if (s->comp == BFS_COMP_NONE)
		return read_plain(s, i, &loc, dst, verify);
	return read_z(s, i, &loc, dst, verify);
}

int bfs_shard_read(struct bfs_shard *s, uint64_t i, uint8_t *dst, size_t dst_cap, bool verify)
{
	char *smsg = NULL;
	int err;

	if (s->shadow && shadow_read(s, i, dst, dst_cap, &smsg) == 0)
		return 0;
	err = shard_pin(s);
	if (!err) {
		err = read_one(s, i, dst, dst_cap, verify);
		shard_unpin(s);
		if (!err && s->shadow)
			shadow_failed(s, smsg);
	}
	free(smsg);
	return err;
}

/* ---- batched reads ------------------------------------------------------ */

/* Restart inflate at a later seek point rather than discard more than this. */
#define RESTART_GAP ((uint64_t)256 << 10)

static void fail_one(const struct bfs_shard *s, int err, int *errs, char **msgs, size_t k)
{
	errs[k] = err;
	if (asprintf(&msgs[k], "%s: %s", s->path, bfs_err_msg()) < 0)
		msgs[k] = NULL;
}

static void read_many_pinned(struct bfs_shard *s, const uint64_t *idx, size_t n,
			     uint8_t *const *dst, bool verify, int *errs, char **msgs);
static void read_many_plain_or_z(struct bfs_shard *s, const uint64_t *idx, size_t n,
				 uint8_t *const *dst, bool verify, int *errs, char **msgs);

void bfs_shard_read_many(struct bfs_shard *s, const uint64_t *idx, size_t n, uint8_t *const *dst,
			 bool verify, int *errs, char **msgs)
{
	for (size_t k = 0; k < n; k++) {
		errs[k] = 0;
		msgs[k] = NULL;
	}
	if (s->shadow && n) {
		/* what the shadow cannot give comes from the shard itself (one
		 * allocation: the records to redo and their arguments) */
		size_t one = sizeof(uint8_t *) + 2 * sizeof(char *) + sizeof(uint64_t) +
			     sizeof(size_t) + sizeof(int);
		char *mem = malloc(n * one);

		if (mem) {
			uint8_t **rd = (uint8_t **)(void *)mem;
			char **rm = (char **)(void *)(rd + n);
			char **sm = rm + n; /* the shadow's messages */
			uint64_t *ri = (uint64_t *)(void *)(sm + n);
			size_t *redo = (size_t *)(void *)(ri + n);
			int *re = (int *)(void *)(redo + n);
			size_t nredo = 0;

			bfs_shard_read_many(s->shadow, idx, n, dst, true, errs, msgs);
			for (size_t k = 0; k < n; k++) {
				if (!errs[k])
					continue;
				ri[nredo] = idx[k];
				rd[nredo] = dst[k];
				sm[nredo] = msgs[k];
				re[nredo] = 0; /* read_many_pinned sets only failures */
				rm[nredo] = NULL;
				redo[nredo++] = k;
				errs[k] = 0;
				msgs[k] = NULL;
			}
			if (nredo)
				read_many_plain_or_z(s, ri, nredo, rd, verify, re, rm);
			for (size_t j = 0; j < nredo; j++) {
				errs[redo[j]] = re[j];
				msgs[redo[j]] = rm[j];
				if (!re[j])
					shadow_failed(s, sm[j]);
				free(sm[j]);
			}
			free(mem);
			return;
		}
	}
	read_many_plain_or_z(s, idx, n, dst, verify, errs, msgs);
}

static void read_many_plain_or_z(struct bfs_shard *s, const uint64_t *idx, size_t n,
				 uint8_t *const *dst, bool verify, int *errs, char **msgs)
{
	int err = shard_pin(s);

	if (err) {
		for (size_t k = 0; k < n; k++)
			fail_one(s, err, errs, msgs, k);
		return;
	}
	read_many_pinned(s, idx, n, dst, verify, errs, msgs);
	shard_unpin(s);
}

/* Records of one call that lie within RUN_GAP bytes of each other in an
 * unmapped plain shard are read with one preadv: each header and footer into
 * a small array, the data straight into its row, and the bytes between two
 * records into one throwaway buffer. A source that charges per read (a
 * network or FUSE filesystem, a disk seek, faultfs's delay) is paid once per
 * run, and no byte is copied twice. Adjacent records (shuffle=block, or any
 * large records side by side) waste nothing; a gap costs its bytes, which a
 * page-cached source copies in ~5 µs per 64 KiB. */
#define RUN_GAP ((uint64_t)64 << 10)
#define RUN_MAX_IOV 1024 /* Linux's IOV_MAX */
#define RUN_MAX_BYTES ((uint64_t)64 << 20)

struct pending {
	uint64_t off;
	uint32_t len;
	size_t k; /* position in the call */
};

static int pending_cmp(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

static uint64_t rec_end(const struct pending *p)
{
	return p->off + HDR_LEN + p->len + FOOT_LEN;
}

/* One preadv for records p[0..m) (sorted, not overlapping). Returns false
 * when it did not read them all (error, short read): the caller reads them
 * one by one, which names what went wrong. */
static bool read_run(struct bfs_shard *s, const struct pending *p, size_t m, uint8_t *const *dst,
		     uint8_t (*hf)[HDR_LEN + FOOT_LEN], uint8_t *sink, struct iovec *v)
{
	size_t nv = 0;
	uint64_t want = 0;
	ssize_t got;

	for (size_t t = 0; t < m; t++) {
		if (t && p[t].off > rec_end(&p[t - 1])) {
			v[nv++] = (struct iovec){ sink, (size_t)(p[t].off - rec_end(&p[t - 1])) };
			want += p[t].off - rec_end(&p[t - 1]);
		}
		v[nv++] = (struct iovec){ hf[t], HDR_LEN };
		v[nv++] = (struct iovec){ dst[p[t].k], p[t].len };
		v[nv++] = (struct iovec){ hf[t] + HDR_LEN, FOOT_LEN };
		want += HDR_LEN + (uint64_t)p[t].len + FOOT_LEN;
	}
	got = shard_preadv(s, v, (int)nv, p[0].off);
	return got >= 0 && (uint64_t)got == want;
}

/* The unmapped records p[0..np) of a plain shard, in runs of nearby ones. */
static void read_runs(struct bfs_shard *s, const uint64_t *idx, struct pending *p, size_t np,
		      uint8_t *const *dst, bool verify, int *errs, char **msgs)
{
	uint8_t(*hf)[HDR_LEN + FOOT_LEN];
	struct iovec *v;
	uint8_t *sink;
	bool runs;
	/* a remote source serves the gap's bytes over its network: only
	 * adjacent records share a read there */
	uint64_t gap = s->remote ? 0 : RUN_GAP;

	if (np == 0)
		return; /* every record was mapped */
	hf = malloc(np * sizeof(*hf));
	v = malloc(RUN_MAX_IOV * sizeof(*v));
	sink = malloc(RUN_GAP);
	runs = hf && v && sink;

	if (runs)
		qsort(p, np, sizeof(*p), pending_cmp);
	for (size_t a = 0, b; a < np; a = b) {
		uint64_t end = rec_end(&p[a]);
		size_t nv = 3;

		for (b = a + 1; runs && b < np; b++) {
			size_t more = p[b].off > end ? 4 : 3;

			if (p[b].off < end || p[b].off - end > gap || nv + more > RUN_MAX_IOV ||
			    rec_end(&p[b]) - p[a].off > RUN_MAX_BYTES)
				break; /* a record twice, too far, or enough for one read */
			nv += more;
			end = rec_end(&p[b]);
		}
		if (!runs)
			b = a + 1;
		if (b - a > 1 && read_run(s, p + a, b - a, dst, hf + a, sink, v)) {
			for (size_t t = a; t < b; t++) {
				struct bfs_record_loc loc = { p[t].off, p[t].len };
				uint64_t i = idx[p[t].k];
				int err = check_header(i, &loc, hf[t], verify);

				if (!err && verify)
					err = check_data(i, &loc, dst[p[t].k], hf[t] + HDR_LEN);
				if (err)
					fail_one(s, err, errs, msgs, p[t].k);
			}
			continue;
		}
		for (size_t t = a; t < b; t++) {
			int err = read_one(s, idx[p[t].k], dst[p[t].k], p[t].len, verify);

			if (err)
				fail_one(s, err, errs, msgs, p[t].k);
		}
	}
	free(hf);
	free(v);
	free(sink);
}

static void read_many_pinned(struct bfs_shard *s, const uint64_t *idx, size_t n,
			     uint8_t *const *dst, bool verify, int *errs, char **msgs)
{
	struct zreader r;
	uint64_t pos = 0;
	bool live = false;
	int err;

	if (s->comp == BFS_COMP_NONE) {
		bool any_mapped = false;
		struct pending *p = malloc((n ? n : 1) * sizeof(*p));
		size_t np = 0;

		touch_records(s, idx, n);
		for (size_t k = 0; k < n; k++) {
			bool in = idx[k] < s->nlocs;
			struct bfs_record_loc loc = { 0, 0 };

			if (in)
				loc = loc_of(s, idx[k]);
			if (in && s->fetch) {
				err = read_staged(s, idx[k], &loc, dst[k], verify);
				if (err == -ENODATA && p) {
					p[np++] = (struct pending){ loc.offset, loc.len, k };
					continue;
				}
				if (err == -ENODATA)
					err = read_one(s, idx[k], dst[k], loc.len, verify);
			} else if (in && mapped(s, &loc)) {
				err = read_mapped(s, idx[k], &loc, dst[k], verify);
				any_mapped = true;
			} else if (in && p) {
				p[np++] = (struct pending){ loc.offset, loc.len, k };
				continue;
			} else {
				err = read_one(s, idx[k], dst[k], loc.len, verify);
			}
			if (err)
				fail_one(s, err, errs, msgs, k);
		}
		read_runs(s, idx, p, np, dst, verify, errs, msgs);
		free(p);
		/* one size check for every record copied from the mapping (a
		 * record past a shrunk end is named as such, whatever its CRC);
		 * a file that has not shrunk holds them all */
		if (any_mapped) {
			uint64_t size = current_size(s);
			for (size_t k = 0; k < n && size < s->file_size; k++) {
				struct bfs_record_loc loc;

				if (idx[k] >= s->nlocs)
					continue;
				loc = loc_of(s, idx[k]);
				if (!mapped(s, &loc) || fits(&loc, size))
					continue;
				free(msgs[k]);
				msgs[k] = NULL;
				fail_one(s, truncated(idx[k], &loc), errs, msgs, k);
			}
		}
		return;
	}
	memset(&r, 0, sizeof(r));
	r.s = s;
	r.scratch = malloc(DISCARD_CHUNK);
	if (!r.scratch) {
		for (size_t k = 0; k < n; k++)
			fail_one(s, bfs_err_set(-ENOMEM, "out of memory"), errs, msgs, k);
		return;
	}
	for (size_t k = 0; k < n; k++) {
		struct bfs_record_loc l;
		const struct bfs_record_loc *loc = &l;
		const struct bfs_seek_point *pt;
		uint8_t hdr[HDR_LEN], foot[FOOT_LEN];
		uint64_t i = idx[k];

		if (i >= s->nlocs) {
			fail_one(s, bfs_err_set(-ENOENT, "record %" PRIu64 ": no such record", i),
				 errs, msgs, k);
			continue;
		}
		l = loc_of(s, i);
		pt = find_point(s, loc->offset);
		/* continue the running inflate when the record lies ahead of it and
		 * no seek point would save much of the way */
		if (!live || pos > loc->offset ||
		    (pt && pt->out_off > pos && pt->out_off - pos > RESTART_GAP)) {
			if (live)
				zin_destroy(&r.z);
			live = false;
			err = zin_init(&r.z, s, READ_IN_CHUNK);
			if (!err) {
				live = true;
				err = zr_start(&r, pt);
			}
			pos = pt ? pt->out_off : 0;
			if (err) {
				fail_one(s, err, errs, msgs, k);
				continue;
			}
		}
		r.rec = i;
		r.rec_off = loc->offset;
		err = zr_read(&r, NULL, loc->offset - pos);
		if (!err)
			err = zr_read(&r, hdr, HDR_LEN);
		if (!err)
			err = check_header(i, loc, hdr, verify);
		if (!err)
			err = zr_read(&r, dst[k], loc->len);
		if (!err)
			err = zr_read(&r, foot, FOOT_LEN);
		if (err) {
			/* the stream position is unknown now: restart for the next */
			zin_destroy(&r.z);
			live = false;
			fail_one(s, err, errs, msgs, k);
			continue;
		}
		pos = loc->offset + HDR_LEN + loc->len + FOOT_LEN;
		if (verify && (err = check_data(i, loc, dst[k], foot)) != 0)
			fail_one(s, err, errs, msgs, k);
	}
	if (live)
		zin_destroy(&r.z);
	free(r.scratch);
}
