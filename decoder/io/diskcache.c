/* SPDX-License-Identifier: Apache-2.0 */
/*
 * diskcache.c — source bytes on a local disk (see diskcache.h).
 *
 * Block size: 1 MiB. It is one FUSE request, and a ranged GET long enough
 * that its first-byte latency (5-20 ms) is paid over a megabyte; a
 * record-sized read rounded out to it costs at most one block, once per
 * block; and the table stays small (1032 bytes per block, 0.1%). Pages of
 * 4 KiB are what a read checks: a record read costs the CRC of one or two
 * pages, not of its whole block.
 *
 * The .blocks file: a 4 KiB header, then an entry per block:
 *   u32 present (PRESENT when the block is there), u32 its length,
 *   u32 crc[256] (CRC32C of each page; the last page of a short block
 *   covers what is there)
 * Header (little-endian): "BFSDCv1\n", u64 block size, u32 page size,
 * u32 name length, u64 object size, i64 version, u64 identity hash, then
 * the name; its last 4 bytes are the CRC32C of the rest.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "diskcache.h"

#include "common.h"
#include "crc32c.h"
#include "workers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define MAGIC "BFSDCv1\n"
#define HEADER 4096u
#define PAGES_PER_BLOCK (BFS_DC_BLOCK / BFS_DC_PAGE)
#define ENTRY (8u + 4u * (unsigned)PAGES_PER_BLOCK)
#define PRESENT 0x53455250u /* "PRES" */
#define TOUCH_EVERY 10 /* seconds between two mtime touches of one object */
#define RESCAN_BYTES ((uint64_t)256 << 20) /* DIR is measured again after this many written */
/* A dataset larger than the bound keeps 63/64 of it: the rest is slack for
 * what a file system allocates beyond the bytes (extent blocks, a short
 * last page), so that the kept bytes never need more room than there is. */
#define KEEP_SLACK 64

struct item {
	struct bfs_dcobj *o;
	uint64_t block;
	uint32_t len;
	uint8_t *data;
	struct item *next;
};

struct bfs_dcobj {
	struct bfs_diskcache *c;
	void *user;
	char *name;
	uint64_t size, nblocks, hash;
	int64_t version;
	pthread_mutex_t lock; /* everything below */
	int dfd, tfd; /* -1: not open yet; -2: unusable */
	/* [nblocks]: 1 the block is there (its CRCs in crcs); written under
	 * lock, read without it too (bfs_dcobj_holds: atomic loads) */
	uint8_t *known;
	/* [nblocks]: the write queued for the block, whose bytes reads take
	 * until it is written (a block fetched, then wanted again before the
	 * writer has it, is not fetched twice); set and cleared under lock,
	 * read without it too (atomic loads) */
	struct item **pend;
	bool loaded; /* the .blocks table was read whole (table_load) */
	uint32_t *crcs; /* [nblocks * PAGES_PER_BLOCK], of the known blocks */
	uint64_t nknown;
	time_t touched;
	time_t absent; /* when a read last found no files (they are looked for again a second later) */
	char path[PATH_MAX]; /* the .data file */
	/* [nblocks]: 1 the block is kept: written when fetched, never
	 * evicted by this mount; the others are not written (see plan());
	 * set by plan() under the cache's lock, read without it (atomic) */
	uint8_t *keep;
	/* [nblocks] or NULL: 1 the block holds bytes of the mount's share
	 * (bfs_dcobj_share), under the cache's lock */
	uint8_t *share;
	struct bfs_dcobj *next; /* the cache's list, in the order of registration */
};

struct bfs_diskcache {
	char *dir;
	uint64_t limit;
	void (*note)(void *ctx, const char *msg);
	void *ctx;
	pthread_mutex_t lock; /* everything below */
	void (*complete)(void *ctx, void *user);
	void *complete_ctx;
	pthread_cond_t work, idle;
	struct bfs_dcobj *objs, *objs_tail;
	/* the objects registered since the last plan(): plan again */
	atomic_bool replan;
	uint64_t *kept; /* [nkept], sorted: hashes of the objects with blocks kept */
	size_t nkept;
	bool shared; /* a share was given: only its blocks are kept */
	bool trimmed; /* trim() found nothing more since the last plan() */
	time_t stuck; /* when an eviction last found nothing it may delete */
	struct item *head, *tail;
	uint64_t qbytes;
	bool busy, stop, no_writes;
	uint64_t since_scan;
	struct bfs_diskcache_stats st; /* but corrupt: */
	/* counted where an object's lock is held, which is taken before the
	 * cache's only (the writer evicts with the cache's lock, then takes
	 * the objects') */
	atomic_uint_least64_t corrupt;
	struct bfs_workers writer; /* the one writer thread, once started */
};

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void note(struct bfs_diskcache *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void note(struct bfs_diskcache *c, const char *fmt, ...)
{
	char msg[PATH_MAX + 256];
	va_list ap;

	if (!c->note)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->note(c->ctx, msg);
}

static ssize_t pread_all(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static int pwrite_all(int fd, const void *buf, size_t n, uint64_t off)
{
	size_t put = 0;

	while (put < n) {
		ssize_t r = pwrite(fd, (const uint8_t *)buf + put, n - put, (off_t)(off + put));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		put += (size_t)r;
	}
	return 0;
}

/* ------------------------------------------------------------- the bound */

/* Bytes the data files in DIR take on disk now. */
static uint64_t measure(const char *dir)
{
	uint64_t used = 0;
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		struct stat st;
		size_t n = strlen(de->d_name);

		if (n > 5 && strcmp(de->d_name + n - 5, ".data") == 0 &&
		    fstatat(dirfd(d), de->d_name, &st, 0) == 0)
			used += (uint64_t)st.st_blocks * 512;
	}
	closedir(d);
	return used;
}

/* Forget object o's files (deleted by an eviction): its next use makes
 * them again. o->lock held. */
static void obj_reset(struct bfs_dcobj *o)
{
	if (o->dfd >= 0)
		close(o->dfd);
	if (o->tfd >= 0)
		close(o->tfd);
	o->dfd = o->tfd = -1;
	for (uint64_t k = 0; k < o->nblocks; k++)
		__atomic_store_n(&o->known[k], 0, __ATOMIC_RELEASE);
	o->nknown = 0;
}

struct victim {
	char name[NAME_MAX + 1]; /* the .blocks file */
	struct timespec mtime;
	uint64_t bytes; /* its .data file's */
};

static int victim_cmp(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;

	/* to the nanosecond: objects written in the same second (the one
	 * being written among them) go in the order they were used */
	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return (x->mtime.tv_sec > y->mtime.tv_sec) - (x->mtime.tv_sec < y->mtime.tv_sec);
	return (x->mtime.tv_nsec > y->mtime.tv_nsec) - (x->mtime.tv_nsec < y->mtime.tv_nsec);
}

static int hash_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static bool keeps(const struct bfs_dcobj *o, uint64_t k)
{
	return __atomic_load_n(&o->keep[k], __ATOMIC_ACQUIRE) != 0;
}

static uint64_t block_bytes(const struct bfs_dcobj *o, uint64_t k)
{
	return o->size - k * BFS_DC_BLOCK < BFS_DC_BLOCK ? o->size - k * BFS_DC_BLOCK
							 : BFS_DC_BLOCK;
}

/* Whether block k of o is one plan() may keep: every block, or with a
 * share given, the blocks holding bytes of it. Lock held. */
static bool wanted_block(const struct bfs_diskcache *c, const struct bfs_dcobj *o, uint64_t k)
{
	return !c->shared || (o->share && o->share[k]);
}

/* Which bytes this mount keeps: the blocks it may keep (all, or those of
 * its share: bfs_dcobj_share), objects in the order they were registered
 * (the dataset's shard order: the same in every epoch and in every mount
 * of the dataset) and blocks in order, while they fit; nothing of the
 * rest. Everything when they fit the bound; 63/64 of it when they do not
 * (KEEP_SLACK). A cyclic scan over more than the bound then finds the
 * same bytes in DIR every epoch, where least-recently-used would have
 * deleted each block just before its next use; and a node reading its
 * share of a dataset larger than its disk keeps that share, not the first
 * shards. Lock held. */
static void plan(struct bfs_diskcache *c)
{
	uint64_t total = 0, budget, left;
	size_t n = 0;
	uint64_t *kept;

	for (struct bfs_dcobj *o = c->objs; o; o = o->next, n++)
		for (uint64_t k = 0; k < o->nblocks; k++)
			total += wanted_block(c, o, k) ? block_bytes(o, k) : 0;
	budget = total <= c->limit ? c->limit : c->limit - c->limit / KEEP_SLACK;
	left = budget;
	kept = malloc((n ? n : 1) * sizeof(*kept));
	n = 0;
	for (struct bfs_dcobj *o = c->objs; o; o = o->next) {
		uint64_t want = 0;
		bool any = false, whole;

		for (uint64_t k = 0; k < o->nblocks; k++)
			want += wanted_block(c, o, k) ? block_bytes(o, k) : 0;
		whole = want <= left;
		for (uint64_t k = 0; k < o->nblocks; k++) {
			uint64_t bytes = block_bytes(o, k);
			/* all of an object that fits, else whole blocks while they
			 * fit; out of memory: keep nothing rather than more than
			 * we can tell */
			bool keep = kept && wanted_block(c, o, k) &&
				    (whole || (bytes == BFS_DC_BLOCK && bytes <= left));

			__atomic_store_n(&o->keep[k], keep, __ATOMIC_RELEASE);
			left -= keep ? bytes : 0;
			any |= keep;
		}
		if (any)
			kept[n++] = o->hash;
	}
	if (kept)
		qsort(kept, n, sizeof(*kept), hash_cmp);
	free(c->kept);
	c->kept = kept;
	c->nkept = kept ? n : 0;
	c->st.kept = budget - left;
	c->trimmed = false;
	atomic_store(&c->replan, false);
}

/* plan() when objects came since. Takes the cache's lock when it must. */
static void plan_now(struct bfs_diskcache *c)
{
	if (!atomic_load(&c->replan))
		return;
	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->replan))
		plan(c);
	pthread_mutex_unlock(&c->lock);
}

/* Whether the object whose files are named by hash h has blocks this mount
 * keeps. Lock held. */
static bool kept_here(const struct bfs_diskcache *c, uint64_t h)
{
	return c->nkept && bsearch(&h, c->kept, c->nkept, sizeof(h), hash_cmp) != NULL;
}

/* Room inside the objects this mount keeps blocks of: their blocks in DIR
 * that it does not keep (an earlier mount's: another share of the
 * dataset, or the first shards) are dropped, the entry first (a reader
 * then fetches; one that still trusts it fails its CRCs), then the bytes
 * (a hole), until `need` more bytes fit. Eviction goes by whole objects,
 * and a node's share has blocks in most of them: without this, what an
 * earlier mount left there would fill DIR for good. Once per plan() when
 * it finds nothing. Lock held; objects' locks taken after it. */
static int obj_open(struct bfs_dcobj *o, bool create);
static void block_bad(struct bfs_dcobj *o, uint64_t k);

static void trim(struct bfs_diskcache *c, uint64_t need)
{
#ifdef FALLOC_FL_PUNCH_HOLE
	bool holes = true; /* DIR's file system punches them */

	for (struct bfs_dcobj *o = c->objs; o && holes && c->st.used + need > c->limit;
	     o = o->next) {
		off_t at = 0;

		if (!kept_here(c, o->hash))
			continue;
		pthread_mutex_lock(&o->lock);
		while (holes && obj_open(o, false) == 0 && c->st.used + need > c->limit &&
		       (at = lseek(o->dfd, at, SEEK_DATA)) >= 0 && (uint64_t)at < o->size) {
			uint64_t k = (uint64_t)at / BFS_DC_BLOCK, len = block_bytes(o, k);

			at = (off_t)((k + 1) * BFS_DC_BLOCK);
			if (keeps(o, k))
				continue;
			block_bad(o, k);
			holes = fallocate(o->dfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					  (off_t)(k * BFS_DC_BLOCK), (off_t)len) == 0;
			if (holes)
				c->st.used = c->st.used > len ? c->st.used - len : 0;
		}
		pthread_mutex_unlock(&o->lock);
	}
#else
	(void)need;
#endif
	c->trimmed = c->st.used + need > c->limit;
}

/* Delete objects, least recently used first, until `need` more bytes fit
 * the bound; never one this mount keeps blocks of (another mount's
 * objects, or this one's it does not keep, go). Lock held; the objects
 * deleted are reset under their own locks, taken after it (nothing takes
 * the cache's lock while holding an object's). */
static void evict(struct bfs_diskcache *c, uint64_t need)
{
	struct victim *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	if (atomic_load(&c->replan))
		plan(c);
	c->st.used = measure(c->dir);
	c->since_scan = 0;
	if (c->st.used + need <= c->limit || !(d = opendir(c->dir)))
		return;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		struct stat st, sd;
		char data[NAME_MAX + 1];
		uint64_t h;

		if (len <= 7 || len > NAME_MAX || strcmp(de->d_name + len - 7, ".blocks") != 0 ||
		    (sscanf(de->d_name, "%16" SCNx64, &h) == 1 && kept_here(c, h)) ||
		    fstatat(dirfd(d), de->d_name, &st, 0) != 0)
			continue;
		snprintf(data, sizeof(data), "%.*s.data", (int)(len - 7), de->d_name);
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct victim *nv = realloc(v, nc * sizeof(*nv));
			if (!nv)
				break;
			v = nv;
			cap = nc;
		}
		snprintf(v[n].name, sizeof(v[n].name), "%s", de->d_name);
		v[n].mtime = st.st_mtim;
		v[n].bytes =
			fstatat(dirfd(d), data, &sd, 0) == 0 ? (uint64_t)sd.st_blocks * 512 : 0;
		n++;
	}
	if (n)
		qsort(v, n, sizeof(*v), victim_cmp);
	for (size_t i = 0; i < n && c->st.used + need > c->limit; i++) {
		size_t len = strlen(v[i].name) - 7;
		char data[NAME_MAX + 1];
		uint64_t h = 0;

		snprintf(data, sizeof(data), "%.*s.data", (int)len, v[i].name);
		(void)unlinkat(dirfd(d), data, 0);
		(void)unlinkat(dirfd(d), v[i].name, 0);
		c->st.used = c->st.used > v[i].bytes ? c->st.used - v[i].bytes : 0;
		c->st.evictions++;
		if (sscanf(v[i].name, "%16" SCNx64, &h) == 1) {
			for (struct bfs_dcobj *o = c->objs; o; o = o->next) {
				if (o->hash != h)
					continue;
				pthread_mutex_lock(&o->lock);
				obj_reset(o);
				pthread_mutex_unlock(&o->lock);
			}
		}
	}
	closedir(d);
	free(v);
	if (c->st.used + need > c->limit && !c->trimmed)
		trim(c, need);
}

/* ------------------------------------------------------------ the objects */

static uint64_t identity(const char *name, uint64_t size, int64_t version)
{
	uint64_t h = bfs_fnv1a(0xcbf29ce484222325ull, name, strlen(name));

	h = bfs_fnv1a(h, &size, sizeof(size));
	return bfs_fnv1a(h, &version, sizeof(version));
}

static void header(const struct bfs_dcobj *o, uint8_t *h)
{
	size_t nl = strlen(o->name);

	memset(h, 0, HEADER);
	memcpy(h, MAGIC, 8);
	put_le64(h + 8, BFS_DC_BLOCK);
	put_le32(h + 16, BFS_DC_PAGE);
	put_le32(h + 20, (uint32_t)nl);
	put_le64(h + 24, o->size);
	put_le64(h + 32, (uint64_t)o->version);
	put_le64(h + 40, o->hash);
	memcpy(h + 48, o->name, nl);
	put_le32(h + HEADER - 4, bfs_crc32c(0, h, HEADER - 4));
}

static uint64_t get_le64(const uint8_t *p)
{
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

/* Open o's files, made when `create` (the writer); a reader finding none
 * looks again a second later (each read of an object not kept would cost
 * a failed open). o->lock held. 0; -errno: DIR does not take
 * them now (a miss; a writer stops); -ESTALE: this object cannot be kept
 * in DIR (its file is another object's: a hash collision; or its name is
 * too long for a header), a miss and nothing else. A damaged header
 * (neither ours nor another object's) is corruption: the table is started
 * again, empty, and the blocks are written again as they are fetched. */
static int obj_open(struct bfs_dcobj *o, bool create)
{
	char tpath[PATH_MAX];
	uint8_t want[HEADER], have[HEADER];
	struct stat st;
	int dfd, tfd, rc;

	if (o->tfd >= 0)
		return 0;
	if (o->tfd == -2 || strlen(o->name) > HEADER - 52)
		return -ESTALE;
	if (!create && o->absent && time(NULL) - o->absent < 1)
		return -ENOENT;
	snprintf(tpath, sizeof(tpath), "%s/%016" PRIx64 ".blocks", o->c->dir, o->hash);
	snprintf(o->path, sizeof(o->path), "%s/%016" PRIx64 ".data", o->c->dir, o->hash);
	dfd = open(o->path, O_RDWR | (create ? O_CREAT : 0) | O_CLOEXEC, 0644);
	tfd = dfd < 0 ? -1 : open(tpath, O_RDWR | (create ? O_CREAT : 0) | O_CLOEXEC, 0644);
	if (dfd < 0 || tfd < 0 || fstat(tfd, &st) != 0) {
		rc = -errno;
		if (dfd >= 0)
			close(dfd);
		if (tfd >= 0)
			close(tfd);
		if (!create && rc == -ENOENT)
			o->absent = time(NULL);
		return rc; /* DIR went away or read-only: a miss, tried again later */
	}
	o->absent = 0;
	header(o, want);
	if (st.st_size >= (off_t)HEADER &&
	    (pread_all(tfd, have, HEADER, 0) != HEADER || memcmp(have, want, HEADER) != 0)) {
		if (memcmp(have, MAGIC, 8) == 0 &&
		    get_le32(have + HEADER - 4) == bfs_crc32c(0, have, HEADER - 4) &&
		    get_le64(have + 40) == o->hash) {
			/* another object's (a hash collision): not ours to use */
			close(dfd);
			close(tfd);
			o->tfd = -2;
			return -ESTALE;
		}
		atomic_fetch_add(&o->c->corrupt, 1);
		if (ftruncate(tfd, 0) != 0) {
			rc = -errno;
			close(dfd);
			close(tfd);
			return rc;
		}
		st.st_size = 0;
	}
	if (st.st_size < (off_t)HEADER) {
		/* new (or a crash before its header, or a damaged one): ours
		 * is the same as any other writer's */
		rc = pwrite_all(tfd, want, HEADER, 0);
		if (rc != 0) {
			close(dfd);
			close(tfd);
			return rc;
		}
	}
	o->dfd = dfd;
	o->tfd = tfd;
	return 0;
}

static bool is_known(const struct bfs_dcobj *o, uint64_t k)
{
	return __atomic_load_n(&o->known[k], __ATOMIC_ACQUIRE) != 0;
}

static void set_known(struct bfs_dcobj *o, uint64_t k, bool v)
{
	__atomic_store_n(&o->known[k], v ? 1 : 0, __ATOMIC_RELEASE);
}

static struct item *pending(const struct bfs_dcobj *o, uint64_t k)
{
	return __atomic_load_n(&o->pend[k], __ATOMIC_ACQUIRE);
}

static void set_pending(struct bfs_dcobj *o, uint64_t k, struct item *it)
{
	__atomic_store_n(&o->pend[k], it, __ATOMIC_RELEASE);
}

/* Block k's table entry e: known (its CRCs into o->crcs) when it says the
 * block is there, whole. o->lock held. */
static bool entry_take(struct bfs_dcobj *o, uint64_t k, const uint8_t *e)
{
	if (get_le32(e) != PRESENT || get_le32(e + 4) != block_bytes(o, k))
		return false;
	for (uint64_t p = 0; p < PAGES_PER_BLOCK; p++)
		o->crcs[k * PAGES_PER_BLOCK + p] = get_le32(e + 8 + 4 * p);
	if (!is_known(o, k)) {
		set_known(o, k, true);
		o->nknown++;
	}
	return true;
}

/* The whole .blocks table, read once, so that bfs_dcobj_holds knows from
 * the start what DIR holds (a block it did not know of was taken for
 * missing and fetched again, with the blocks read together with it).
 * o->lock held. */
static void table_load(struct bfs_dcobj *o)
{
	enum { CHUNK = 256 }; /* entries per read */
	uint8_t *buf;

	if (o->loaded)
		return;
	o->loaded = true;
	if (obj_open(o, false) != 0 || !(buf = malloc((size_t)CHUNK * ENTRY)))
		return;
	for (uint64_t k0 = 0; k0 < o->nblocks; k0 += CHUNK) {
		uint64_t n = o->nblocks - k0 < CHUNK ? o->nblocks - k0 : CHUNK;
		ssize_t got = pread_all(o->tfd, buf, (size_t)(n * ENTRY), HEADER + k0 * ENTRY);

		for (uint64_t i = 0; got > 0 && i < n && (i + 1) * ENTRY <= (uint64_t)got; i++)
			(void)entry_take(o, k0 + i, buf + i * ENTRY);
		if (got < (ssize_t)(n * ENTRY))
			break;
	}
	free(buf);
}

/* Whether block k is there, its CRCs then in o->crcs. o->lock held. */
static bool block_known(struct bfs_dcobj *o, uint64_t k)
{
	uint8_t e[ENTRY];

	if (is_known(o, k))
		return true;
	table_load(o);
	if (is_known(o, k))
		return true;
	/* another mount may have written it since */
	if (obj_open(o, false) != 0 || pread_all(o->tfd, e, ENTRY, HEADER + k * ENTRY) != ENTRY)
		return false;
	return entry_take(o, k, e);
}

/* A block that failed its CRCs: not there any more (for every mount), so
 * that the bytes fetched again are written again. o->lock held. */
static void block_bad(struct bfs_dcobj *o, uint64_t k)
{
	uint8_t zero[4] = { 0 };

	if (is_known(o, k)) {
		set_known(o, k, false);
		o->nknown--;
	}
	if (o->tfd >= 0)
		(void)pwrite_all(o->tfd, zero, 4, HEADER + k * ENTRY);
}

static void touch(struct bfs_dcobj *o)
{
	time_t now = time(NULL);

	if (o->tfd >= 0 && now - o->touched >= TOUCH_EVERY) {
		o->touched = now;
		(void)futimens(o->tfd, NULL);
	}
}

struct bfs_dcobj *bfs_diskcache_obj(struct bfs_diskcache *c, const char *name, uint64_t size,
				    int64_t version, void *user)
{
	struct bfs_dcobj *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->c = c;
	o->user = user;
	o->size = size;
	o->version = version;
	o->nblocks = (size + BFS_DC_BLOCK - 1) / BFS_DC_BLOCK;
	o->hash = identity(name, size, version);
	o->dfd = o->tfd = -1;
	o->name = strdup(name);
	o->known = calloc(o->nblocks ? o->nblocks : 1, 1);
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
	o->pend = calloc(o->nblocks ? o->nblocks : 1, sizeof(*o->pend));
	o->keep = calloc(o->nblocks ? o->nblocks : 1, 1);
	o->crcs = calloc(o->nblocks ? o->nblocks * PAGES_PER_BLOCK : 1, sizeof(*o->crcs));
	if (!o->name || !o->known || !o->pend || !o->keep || !o->crcs) {
		free(o->name);
		free(o->known);
		free(o->pend);
		free(o->keep);
		free(o->crcs);
		free(o);
		return NULL;
	}
	pthread_mutex_init(&o->lock, NULL);
	pthread_mutex_lock(&c->lock);
	if (c->objs_tail)
		c->objs_tail->next = o;
	else
		c->objs = o;
	c->objs_tail = o;
	atomic_store(&c->replan, true);
	pthread_mutex_unlock(&c->lock);
	return o;
}

static void obj_free(struct bfs_dcobj *o)
{
	if (o->dfd >= 0)
		close(o->dfd);
	if (o->tfd >= 0)
		close(o->tfd);
	pthread_mutex_destroy(&o->lock);
	free(o->name);
	free(o->known);
	free(o->pend);
	free(o->keep);
	free(o->share);
	free(o->crcs);
	free(o);
}

/* Bytes [off, off + n) of blocks that are there, from the .data file, the
 * pages holding them checked. 0; -ENODATA (a page failed its CRC, or the
 * file is short: its block is bad, *corrupt set). o->lock held. */
static int read_pages(struct bfs_dcobj *o, uint8_t *dst, size_t n, uint64_t off, bool *corrupt)
{
	uint64_t end = off + n, p0 = off / BFS_DC_PAGE, p1 = (end - 1) / BFS_DC_PAGE + 1;
	uint64_t a = p0 * BFS_DC_PAGE, b = p1 * BFS_DC_PAGE < o->size ? p1 * BFS_DC_PAGE : o->size;
	uint8_t *buf = malloc((size_t)(b - a));
	ssize_t got;
	int rc = 0;

	if (!buf)
		return -ENODATA;
	got = pread_all(o->dfd, buf, (size_t)(b - a), a);
	for (uint64_t p = p0; p < p1 && rc == 0; p++) {
		uint64_t pa = p * BFS_DC_PAGE - a;
		uint64_t plen = b - a - pa < BFS_DC_PAGE ? b - a - pa : BFS_DC_PAGE;

		if (got < 0 || (uint64_t)got < pa + plen ||
		    bfs_crc32c(0, buf + pa, (size_t)plen) != o->crcs[p]) {
			block_bad(o, p * BFS_DC_PAGE / BFS_DC_BLOCK);
			*corrupt = true;
			rc = -ENODATA;
		}
	}
	if (rc == 0)
		memcpy(dst, buf + (off - a), n);
	free(buf);
	return rc;
}

/* Bytes [off, end) from DIR or from the writes queued, block by block
 * (runs of blocks that are there in one read). o->lock held. */
static int read_blocks(struct bfs_dcobj *o, uint8_t *dst, uint64_t off, uint64_t end, bool *corrupt)
{
	for (uint64_t k = off / BFS_DC_BLOCK; k <= (end - 1) / BFS_DC_BLOCK; k++)
		if (!pending(o, k) && !block_known(o, k))
			return -ENODATA;
	while (off < end) {
		uint64_t k = off / BFS_DC_BLOCK, e = (k + 1) * BFS_DC_BLOCK;
		struct item *it = pending(o, k);

		if (it) { /* written soon: its bytes are here */
			e = e < end ? e : end;
			memcpy(dst, it->data + (off - k * BFS_DC_BLOCK), (size_t)(e - off));
		} else {
			int rc;

			while (e < end && !pending(o, e / BFS_DC_BLOCK))
				e += BFS_DC_BLOCK;
			e = e < end ? e : end;
			rc = read_pages(o, dst, (size_t)(e - off), off, corrupt);
			if (rc)
				return rc;
		}
		dst += e - off;
		off = e;
	}
	return 0;
}

int bfs_dcobj_read(struct bfs_dcobj *o, void *dst, size_t n, uint64_t off)
{
	struct bfs_diskcache *c = o->c;
	uint64_t end = off + n;
	bool corrupt = false;
	int rc;

	if (n == 0)
		return 0;
	if (end > o->size || end < off)
		return -ENODATA;
	pthread_mutex_lock(&o->lock);
	rc = read_blocks(o, dst, off, end, &corrupt);
	if (rc == 0)
		touch(o);
	pthread_mutex_unlock(&o->lock);
	pthread_mutex_lock(&c->lock);
	if (rc == 0) {
		c->st.hits++;
		c->st.hit_bytes += n;
	} else {
		c->st.misses++;
	}
	if (corrupt)
		atomic_fetch_add(&c->corrupt, 1);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Whether block k of o is there or queued. o->lock held. */
static bool held_locked(const struct bfs_dcobj *o, uint64_t k)
{
	return is_known(o, k) || pending(o, k);
}

/* Queue block k of o, its bytes at src (len), for the writer: its reads
 * take them from the queue until it is written. */
static void queue_block(struct bfs_dcobj *o, uint64_t k, const uint8_t *src, uint32_t len)
{
	struct bfs_diskcache *c = o->c;
	struct item *it;
	bool skip;

	pthread_mutex_lock(&o->lock);
	skip = held_locked(o, k);
	pthread_mutex_unlock(&o->lock);
	if (skip)
		return;
	/* room in the queue first: a full one drops the block (it is fetched
	 * again when next wanted), without a copy */
	pthread_mutex_lock(&c->lock);
	skip = c->no_writes || c->qbytes + len > BFS_DC_QUEUE;
	c->st.dropped += skip && !c->no_writes;
	if (!skip)
		c->qbytes += len;
	pthread_mutex_unlock(&c->lock);
	if (skip)
		return;
	it = malloc(sizeof(*it));
	if (it && !(it->data = malloc(len))) {
		free(it);
		it = NULL;
	}
	if (it) {
		memcpy(it->data, src, len);
		it->o = o;
		it->block = k;
		it->len = len;
		it->next = NULL;
		pthread_mutex_lock(&o->lock);
		skip = held_locked(o, k); /* another fetch of it queued it meanwhile */
		if (!skip)
			set_pending(o, k, it);
		pthread_mutex_unlock(&o->lock);
	}
	pthread_mutex_lock(&c->lock);
	if (!it || skip) {
		c->qbytes -= len;
		pthread_mutex_unlock(&c->lock);
		if (it)
			free(it->data);
		free(it);
		return;
	}
	if (c->tail)
		c->tail->next = it;
	else
		c->head = it;
	c->tail = it;
	pthread_cond_signal(&c->work);
	pthread_mutex_unlock(&c->lock);
}

void bfs_dcobj_put(struct bfs_dcobj *o, const void *src, size_t n, uint64_t off)
{
	uint64_t end = off + n;

	if (o->c->no_writes)
		return;
	plan_now(o->c);
	for (uint64_t k = (off + BFS_DC_BLOCK - 1) / BFS_DC_BLOCK; k < o->nblocks; k++) {
		uint64_t a = k * BFS_DC_BLOCK, b = a + block_bytes(o, k);

		if (b > end)
			break;
		if (keeps(o, k))
			queue_block(o, k, (const uint8_t *)src + (a - off), (uint32_t)(b - a));
	}
}

/* Write one block: data, its page CRCs, then its present word. */
static int write_block(struct bfs_dcobj *o, const struct item *it)
{
	uint8_t e[ENTRY];
	uint32_t *crc = o->crcs + it->block * PAGES_PER_BLOCK;
	int rc;

	memset(e, 0, sizeof(e));
	for (uint64_t p = 0; p * BFS_DC_PAGE < it->len; p++) {
		uint64_t plen = it->len - p * BFS_DC_PAGE < BFS_DC_PAGE ? it->len - p * BFS_DC_PAGE
									: BFS_DC_PAGE;
		crc[p] = bfs_crc32c(0, it->data + p * BFS_DC_PAGE, (size_t)plen);
		put_le32(e + 8 + 4 * p, crc[p]);
	}
	put_le32(e, PRESENT);
	put_le32(e + 4, it->len);
	rc = pwrite_all(o->dfd, it->data, it->len, it->block * BFS_DC_BLOCK);
	if (!rc)
		rc = pwrite_all(o->tfd, e + 8, ENTRY - 8, HEADER + it->block * ENTRY + 8);
	if (!rc)
		rc = pwrite_all(o->tfd, e, 8, HEADER + it->block * ENTRY);
	return rc;
}

static void *writer(void *arg)
{
	struct bfs_diskcache *c = arg;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct item *it;
		struct bfs_dcobj *o;
		int rc = 0;

		while (!c->head && !c->stop) {
			c->busy = false;
			pthread_cond_broadcast(&c->idle);
			pthread_cond_wait(&c->work, &c->lock);
		}
		if (!c->head)
			break;
		it = c->head;
		c->head = it->next;
		if (!c->head)
			c->tail = NULL;
		c->busy = true;
		/* a DIR full of what this mount keeps is measured again once a
		 * second, not for every block that does not fit */
		if (!c->no_writes &&
		    (c->since_scan > RESCAN_BYTES ||
		     (c->st.used + it->len > c->limit && time(NULL) != c->stuck))) {
			evict(c, it->len);
			if (c->st.used + it->len > c->limit)
				c->stuck = time(NULL);
		}
		bool room = c->st.used + it->len <= c->limit && !c->no_writes;
		if (!room && !c->no_writes)
			c->st.refused++;
		pthread_mutex_unlock(&c->lock);
		o = it->o;
		bool done = false, wrote = false;
		int orc = 0;

		pthread_mutex_lock(&o->lock);
		if (room && !is_known(o, it->block) && (orc = obj_open(o, true)) == 0) {
			rc = write_block(o, it);
			if (!rc) {
				wrote = true;
				set_known(o, it->block, true);
				o->nknown++;
				done = o->nknown == o->nblocks;
				touch(o);
			}
		} else if (room && !is_known(o, it->block) && orc != -ESTALE) {
			rc = orc; /* DIR does not take files: writing stops */
		}
		/* no read copies from it once this is seen (they do under
		 * o->lock): it is freed below */
		if (pending(o, it->block) == it)
			set_pending(o, it->block, NULL);
		pthread_mutex_unlock(&o->lock);
		pthread_mutex_lock(&c->lock);
		if (done && c->complete) {
			/* the writer runs it: set_complete waits for it while
			 * busy, so it outlives the call */
			void (*fn)(void *, void *) = c->complete;
			void *cctx = c->complete_ctx;

			pthread_mutex_unlock(&c->lock);
			fn(cctx, o->user);
			pthread_mutex_lock(&c->lock);
		}
		c->qbytes -= it->len;
		if (wrote) {
			c->st.bytes += it->len;
			c->st.used += it->len;
			c->since_scan += it->len;
		} else if (rc && !c->no_writes) {
			c->no_writes = true;
			note(c,
			     "disk_cache %s: writing stopped (%s); reads go on from what it holds",
			     c->dir, strerror(-rc));
		}
		free(it->data);
		free(it);
	}
	c->busy = false;
	pthread_cond_broadcast(&c->idle);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

uint64_t bfs_dcobj_kept(struct bfs_dcobj *o)
{
	uint64_t end;

	return bfs_dcobj_kept_at(o, 0, &end) ? end : 0;
}

bool bfs_dcobj_kept_at(struct bfs_dcobj *o, uint64_t off, uint64_t *end)
{
	uint64_t k = off / BFS_DC_BLOCK;
	bool kept;

	plan_now(o->c);
	*end = o->size;
	if (k >= o->nblocks)
		return false;
	kept = keeps(o, k);
	for (k++; k < o->nblocks; k++)
		if (keeps(o, k) != kept) {
			*end = k * BFS_DC_BLOCK;
			break;
		}
	return kept;
}

void bfs_dcobj_share(struct bfs_dcobj *o, uint64_t off, uint64_t len)
{
	struct bfs_diskcache *c = o->c;
	uint64_t end = off + len < o->size ? off + len : o->size;

	if (off >= end)
		return;
	pthread_mutex_lock(&c->lock);
	if (!o->share)
		o->share = calloc(o->nblocks, 1);
	if (o->share) {
		for (uint64_t k = off / BFS_DC_BLOCK; k <= (end - 1) / BFS_DC_BLOCK; k++)
			o->share[k] = 1;
		c->shared = true;
		atomic_store(&c->replan, true);
	}
	pthread_mutex_unlock(&c->lock);
}

bool bfs_dcobj_holds(struct bfs_dcobj *o, uint64_t off, uint64_t len)
{
	bool all = len > 0 && off + len <= o->size && off + len > off;

	/* no lock: never false for want of one while another thread reads
	 * the object (a block the copy holds was then fetched again, with
	 * the blocks read together with it) */
	for (uint64_t k = off / BFS_DC_BLOCK; all && k <= (off + len - 1) / BFS_DC_BLOCK; k++)
		all = is_known(o, k) || pending(o, k);
	return all;
}

bool bfs_dcobj_complete(struct bfs_dcobj *o)
{
	bool all = true;

	pthread_mutex_lock(&o->lock);
	o->absent = 0; /* look now */
	for (uint64_t k = 0; k < o->nblocks && all; k++)
		all = block_known(o, k);
	pthread_mutex_unlock(&o->lock);
	return all && o->nblocks > 0;
}

bool bfs_dcobj_verify(struct bfs_dcobj *o, const char **path)
{
	uint8_t *buf = malloc(BFS_DC_BLOCK);
	bool good = buf != NULL;

	pthread_mutex_lock(&o->lock);
	o->absent = 0; /* look now */
	for (uint64_t k = 0; k < o->nblocks && good; k++) {
		uint64_t blen = o->size - k * BFS_DC_BLOCK < BFS_DC_BLOCK
					? o->size - k * BFS_DC_BLOCK
					: BFS_DC_BLOCK;

		good = block_known(o, k) &&
		       pread_all(o->dfd, buf, (size_t)blen, k * BFS_DC_BLOCK) == (ssize_t)blen;
		for (uint64_t p = 0; good && p * BFS_DC_PAGE < blen; p++) {
			uint64_t plen = blen - p * BFS_DC_PAGE < BFS_DC_PAGE
						? blen - p * BFS_DC_PAGE
						: BFS_DC_PAGE;
			good = bfs_crc32c(0, buf + p * BFS_DC_PAGE, (size_t)plen) ==
			       o->crcs[k * PAGES_PER_BLOCK + p];
		}
		if (!good && is_known(o, k)) {
			block_bad(o, k);
			atomic_fetch_add(&o->c->corrupt, 1);
		}
	}
	if (good)
		*path = o->path;
	pthread_mutex_unlock(&o->lock);
	free(buf);
	return good && o->nblocks > 0;
}

void bfs_dcobj_drop(struct bfs_dcobj *o)
{
	char tpath[PATH_MAX];

	pthread_mutex_lock(&o->lock);
	snprintf(tpath, sizeof(tpath), "%s/%016" PRIx64 ".blocks", o->c->dir, o->hash);
	if (o->path[0])
		(void)unlink(o->path);
	(void)unlink(tpath);
	obj_reset(o);
	pthread_mutex_unlock(&o->lock);
	atomic_fetch_add(&o->c->corrupt, 1);
}

bool bfs_dcobj_forget(struct bfs_dcobj *o, uint64_t off, uint64_t len)
{
	uint64_t end = off + len < o->size ? off + len : o->size;
	uint8_t *buf = off < end ? malloc((size_t)(end - off)) : NULL;
	bool corrupt = false;

	if (!buf)
		return false;
	/* the bad pages say which blocks are bad (block_bad, for every
	 * mount: a record across two blocks is bad in one of them) */
	pthread_mutex_lock(&o->lock);
	(void)read_blocks(o, buf, off, end, &corrupt);
	pthread_mutex_unlock(&o->lock);
	free(buf);
	if (corrupt)
		atomic_fetch_add(&o->c->corrupt, 1);
	return corrupt;
}

/* ------------------------------------------------------------ lifetime */

int bfs_diskcache_check(const char *dir)
{
	char probe[PATH_MAX];
	int rc = bfs_cache_dir_make(dir), fd;

	if (rc)
		return bfs_err_set(rc, "option 'disk_cache=%s': %s", dir, strerror(-rc));
	/* the directory must take files: a read-only one is refused now */
	if ((size_t)snprintf(probe, sizeof(probe), "%s/.probe.XXXXXX", dir) >= sizeof(probe))
		return bfs_err_set(-ENAMETOOLONG, "option 'disk_cache=%s': path too long", dir);
	fd = mkstemp(probe);
	if (fd < 0) {
		rc = -errno;
		return bfs_err_set(rc, "option 'disk_cache=%s': %s", dir, strerror(-rc));
	}
	close(fd);
	unlink(probe);
	return 0;
}

int bfs_diskcache_open(struct bfs_diskcache **out, const struct bfs_diskcache_opts *o)
{
	struct bfs_diskcache *c;
	struct statvfs vfs;
	int rc;

	*out = NULL;
	rc = bfs_diskcache_check(o->dir);
	if (rc)
		return rc;
	c = calloc(1, sizeof(*c));
	if (!c || !(c->dir = strdup(o->dir))) {
		free(c);
		return -ENOMEM;
	}
	c->limit = o->size;
	if (!c->limit)
		c->limit = statvfs(o->dir, &vfs) == 0
				   ? (uint64_t)vfs.f_blocks * (uint64_t)vfs.f_frsize / 10
				   : (uint64_t)1 << 30;
	c->note = o->note;
	c->ctx = o->ctx;
	c->st.limit = c->limit;
	c->st.used = measure(c->dir);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->work, NULL);
	pthread_cond_init(&c->idle, NULL);
	rc = bfs_workers_start(&c->writer, 1, writer, c, 0, false);
	if (rc) {
		bfs_diskcache_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

void bfs_diskcache_set_complete(struct bfs_diskcache *c, void (*fn)(void *ctx, void *user),
				void *ctx)
{
	pthread_mutex_lock(&c->lock);
	c->complete = fn;
	c->complete_ctx = ctx;
	while (c->busy)
		pthread_cond_wait(&c->idle, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

void bfs_diskcache_flush(struct bfs_diskcache *c)
{
	pthread_mutex_lock(&c->lock);
	while (c->head || c->busy)
		pthread_cond_wait(&c->idle, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

void bfs_diskcache_close(struct bfs_diskcache *c)
{
	if (!c)
		return;
	bfs_workers_stop(&c->lock, &c->stop, &c->work, NULL);
	(void)bfs_workers_join(&c->writer, 0);
	while (c->objs) {
		struct bfs_dcobj *o = c->objs;
		c->objs = o->next;
		obj_free(o);
	}
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->work);
	pthread_cond_destroy(&c->idle);
	free(c->kept);
	free(c->dir);
	free(c);
}

void bfs_diskcache_stats(struct bfs_diskcache *c, struct bfs_diskcache_stats *out)
{
	plan_now(c);
	pthread_mutex_lock(&c->lock);
	*out = c->st;
	pthread_mutex_unlock(&c->lock);
	out->corrupt = atomic_load(&c->corrupt);
}
