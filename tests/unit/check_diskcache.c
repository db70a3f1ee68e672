/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_diskcache.c — the disk cache of source bytes (diskcache.h): what is
 * put reads back, what is not is a miss; the object's short last block;
 * every kind of damage to its files (the .data bytes, the .blocks table,
 * its header, a torn block) is never served, is counted as corrupt where
 * it is corruption, and is written again by the next put; the bound, the
 * part a cache smaller than its objects keeps (the same every pass of a
 * scan, and for a second mount), and the least-recently-used order of
 * other objects; two caches (two mounts) on one DIR from threads at once;
 * a DIR that cannot be the cache; complete and verify.
 *
 * White box where it has to be: the tests damage the files at the places
 * diskcache.c's header comment gives (a 4 KiB header, then per block an
 * entry of a present word, a length and 256 page CRCs), and name them by
 * the same hash of the object's identity.
 */
#include "common.h"
#include "crc32c.h"
#include "diskcache.h"
#include "testfiles.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define MiB ((uint64_t)1 << 20)
#define BLK BFS_DC_BLOCK
/* the .blocks layout (diskcache.c) */
#define HDR 4096u
#define ENTRY (8u + 4u * (unsigned)(BFS_DC_BLOCK / BFS_DC_PAGE))

/* The source's bytes: object `id`, offset `off`. No page is all zeros, so
 * a hole never passes for them. */
static uint8_t pat(unsigned id, uint64_t off)
{
	return (uint8_t)(off * 31 + id * 101 + (off >> 12) * 7 + 1 + (off % 255 == 0));
}

static uint8_t *src_bytes(unsigned id, uint64_t size)
{
	uint8_t *p = malloc(size ? size : 1);

	ck_assert_ptr_nonnull(p);
	for (uint64_t i = 0; i < size; i++)
		p[i] = pat(id, i);
	return p;
}

/* ------------------------------------------------------------ helpers */

struct notes {
	pthread_mutex_t m;
	char text[8192];
	int n;
};

static void on_note(void *ctx, const char *msg)
{
	struct notes *nt = ctx;

	pthread_mutex_lock(&nt->m);
	size_t len = strlen(nt->text);
	snprintf(nt->text + len, sizeof(nt->text) - len, "%s\n", msg);
	nt->n++;
	pthread_mutex_unlock(&nt->m);
}

static struct notes notes = { .m = PTHREAD_MUTEX_INITIALIZER };

static struct bfs_diskcache *dc_open(const char *dir, uint64_t size)
{
	struct bfs_diskcache_opts o = { .dir = dir, .size = size, .note = on_note, .ctx = &notes };
	struct bfs_diskcache *c = NULL;

	ck_assert_msg(bfs_diskcache_open(&c, &o) == 0, "%s", bfs_err_msg());
	ck_assert_ptr_nonnull(c);
	return c;
}

static struct bfs_diskcache_stats dc_stats(struct bfs_diskcache *c)
{
	struct bfs_diskcache_stats st;

	bfs_diskcache_stats(c, &st);
	return st;
}

/* The name of object `id` as the tests give it. */
static void obj_name(char *dst, size_t cap, unsigned id)
{
	snprintf(dst, cap, "/bucket/data/part-%05u.tfrecord", id);
}

#define VERSION 1700000000123456789ll

static struct bfs_dcobj *dc_obj(struct bfs_diskcache *c, unsigned id, uint64_t size)
{
	char name[128];
	struct bfs_dcobj *o;

	obj_name(name, sizeof(name), id);
	o = bfs_diskcache_obj(c, name, size, VERSION, (void *)(uintptr_t)(id + 1));
	ck_assert_ptr_nonnull(o);
	return o;
}

/* The hash naming object id's files, as diskcache.c makes it (name,
 * size, version). */
static uint64_t obj_hash(unsigned id, uint64_t size)
{
	char name[128];
	int64_t version = VERSION;
	uint64_t h;

	obj_name(name, sizeof(name), id);
	h = bfs_fnv1a(0xcbf29ce484222325ull, name, strlen(name));
	h = bfs_fnv1a(h, &size, sizeof(size));
	return bfs_fnv1a(h, &version, sizeof(version));
}

/* Object id's files in dir: "<hash>.data" and "<hash>.blocks". */
static void obj_file(char *dst, size_t cap, const char *dir, unsigned id, uint64_t size,
		     const char *suffix)
{
	snprintf(dst, cap, "%s/%016" PRIx64 "%s", dir, obj_hash(id, size), suffix);
}

static bool exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* Put [off, off + n) of object id's bytes. */
static void put(struct bfs_dcobj *o, const uint8_t *all, uint64_t off, uint64_t n)
{
	bfs_dcobj_put(o, all + off, (size_t)n, off);
}

/* Read [off, off + n): 0 and the right bytes, or the error. A wrong byte
 * fails the test whatever the caller expects. */
static int get(struct bfs_dcobj *o, const uint8_t *all, uint64_t off, uint64_t n)
{
	uint8_t *buf = malloc(n ? n : 1);
	int rc;

	ck_assert_ptr_nonnull(buf);
	memset(buf, 0xee, n);
	rc = bfs_dcobj_read(o, buf, (size_t)n, off);
	if (rc == 0)
		ck_assert_msg(memcmp(buf, all + off, n) == 0,
			      "wrong bytes served for [%" PRIu64 ", +%" PRIu64 ")", off, n);
	free(buf);
	return rc;
}

static void patch(const char *path, uint64_t off, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY);

	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(pwrite(fd, p, n, (off_t)off), (ssize_t)n);
	close(fd);
}

static void flip(const char *path, uint64_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(pread(fd, &b, 1, (off_t)off), 1);
	b ^= 0x40;
	ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)off), 1);
	close(fd);
}

/* Bytes the .data files in dir take on disk. */
static uint64_t du_data(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t used = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		struct stat st;

		if (n > 5 && strcmp(de->d_name + n - 5, ".data") == 0 &&
		    fstatat(dirfd(d), de->d_name, &st, 0) == 0)
			used += (uint64_t)st.st_blocks * 512;
	}
	closedir(d);
	return used;
}

/* Make the bind mount at path read-only, keeping the flags it has (a
 * container locks nosuid, nodev...: a remount without them is refused). */
static int remount_ro(const char *path)
{
	struct statvfs v;
	unsigned long fl = MS_REMOUNT | MS_BIND | MS_RDONLY;

	if (statvfs(path, &v) != 0)
		return -1;
	if (v.f_flag & ST_NOSUID)
		fl |= MS_NOSUID;
	if (v.f_flag & ST_NODEV)
		fl |= MS_NODEV;
	if (v.f_flag & ST_NOEXEC)
		fl |= MS_NOEXEC;
	if (v.f_flag & ST_NOATIME)
		fl |= MS_NOATIME;
	if (v.f_flag & ST_NODIRATIME)
		fl |= MS_NODIRATIME;
	if (v.f_flag & ST_RELATIME)
		fl |= MS_RELATIME;
	return mount(NULL, path, NULL, fl, NULL);
}

static void set_mtime(const char *path, time_t t)
{
	struct timespec ts[2] = { { .tv_sec = t }, { .tv_sec = t } };

	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* ------------------------------------------------------- reads and puts */

START_TEST(put_then_read_round_trips)
{
	char dir[64];
	const uint64_t size = 3 * BLK + 12345;
	uint8_t *all = src_bytes(0, size);
	struct bfs_diskcache *c;
	struct bfs_dcobj *o;
	struct bfs_diskcache_stats st;
	const char *path = NULL;
	size_t len;
	uint8_t *copy;

	test_mkdir(dir, sizeof(dir), "check_dc_rt");
	c = dc_open(dir, 0);
	o = dc_obj(c, 0, size);
	put(o, all, 0, size);
	bfs_diskcache_flush(c);
	st = dc_stats(c);
	ck_assert_uint_eq(st.bytes, size);
	ck_assert_uint_eq(st.dropped, 0);
	/* inside a page, across pages, across blocks, the short end, all */
	ck_assert_int_eq(get(o, all, 0, 1), 0);
	ck_assert_int_eq(get(o, all, 4090, 20), 0);
	ck_assert_int_eq(get(o, all, BLK - 10, 20), 0);
	ck_assert_int_eq(get(o, all, 2 * BLK - 5000, BLK + 9000), 0);
	ck_assert_int_eq(get(o, all, size - 100, 100), 0);
	ck_assert_int_eq(get(o, all, size - 1, 1), 0);
	ck_assert_int_eq(get(o, all, 0, size), 0);
	st = dc_stats(c);
	ck_assert_uint_eq(st.hits, 7);
	ck_assert_uint_eq(st.misses, 0);
	ck_assert_uint_eq(st.hit_bytes, 1 + 20 + 20 + BLK + 9000 + 100 + 1 + size);
	ck_assert(bfs_dcobj_complete(o));
	ck_assert(bfs_dcobj_verify(o, &path));
	ck_assert_ptr_nonnull(path);
	copy = test_slurp(path, &len);
	ck_assert_uint_eq(len, size);
	ck_assert(memcmp(copy, all, size) == 0);
	free(copy);
	bfs_diskcache_close(c);

	/* as a second mount would: everything from DIR, nothing put */
	c = dc_open(dir, 0);
	o = dc_obj(c, 0, size);
	ck_assert(bfs_dcobj_complete(o));
	ck_assert_int_eq(get(o, all, 0, size), 0);
	ck_assert_int_eq(get(o, all, BLK + 77, 3 * 4096), 0);
	st = dc_stats(c);
	ck_assert_uint_eq(st.hits, 2);
	ck_assert_uint_eq(st.bytes, 0);
	/* another version of the object is another object: nothing */
	{
		char name[128];
		struct bfs_dcobj *v;
		uint8_t b;

		obj_name(name, sizeof(name), 0);
		v = bfs_diskcache_obj(c, name, size, VERSION + 1, NULL);
		ck_assert_int_eq(bfs_dcobj_read(v, &b, 1, 0), -ENODATA);
		v = bfs_diskcache_obj(c, name, size + 1, VERSION, NULL);
		ck_assert_int_eq(bfs_dcobj_read(v, &b, 1, 0), -ENODATA);
	}
	bfs_diskcache_close(c);
	free(all);
	test_rmdir(dir);
}
END_TEST

/* What DIR holds is known from the start of a mount (the whole table, not
 * the blocks before the first missing one), and a block put is held and
 * read back at once, written or still queued: the I/O stage asks holds()
 * whether to read a block from the copy or fetch it, and a block fetched
 * again for want of either went to the source twice. */
START_TEST(holds_knows_dir_at_once_and_blocks_queued)
{
	char dir[64];
	const uint64_t size = 16 * BLK + 777;
	uint8_t *all = src_bytes(2, size);
	struct bfs_diskcache *c;
	struct bfs_dcobj *o;

	test_mkdir(dir, sizeof(dir), "check_dc_holds");
	c = dc_open(dir, 0);
	o = dc_obj(c, 0, size);
	put(o, all, 0, BLK);
	put(o, all, 2 * BLK, BLK);
	put(o, all, 5 * BLK, BLK);
	bfs_diskcache_flush(c);
	bfs_diskcache_close(c);

	/* a new mount: block 1 missing, 2 and 5 there */
	c = dc_open(dir, 0);
	o = dc_obj(c, 0, size);
	ck_assert(!bfs_dcobj_complete(o));
	ck_assert(bfs_dcobj_holds(o, 0, BLK));
	ck_assert(!bfs_dcobj_holds(o, BLK, BLK));
	ck_assert(bfs_dcobj_holds(o, 2 * BLK + 10, 100));
	ck_assert(bfs_dcobj_holds(o, 5 * BLK, BLK));
	ck_assert(!bfs_dcobj_holds(o, 4 * BLK, 2 * BLK));
	/* the rest put in one go: each block held and read back at once,
	 * whether the writer has it yet or not */
	put(o, all, 6 * BLK, size - 6 * BLK);
	ck_assert(bfs_dcobj_holds(o, size - 100, 100));
	ck_assert_int_eq(get(o, all, size - 5000, 5000), 0);
	ck_assert_int_eq(get(o, all, 7 * BLK - 100, 200), 0);
	ck_assert(bfs_dcobj_holds(o, 6 * BLK, size - 6 * BLK));
	ck_assert_int_eq(get(o, all, 5 * BLK, size - 5 * BLK), 0);
	bfs_diskcache_flush(c);
	ck_assert_uint_eq(dc_stats(c).bytes, size - 6 * BLK);
	ck_assert_uint_eq(dc_stats(c).corrupt, 0);
	bfs_diskcache_close(c);
	free(all);
	test_rmdir(dir);
}
END_TEST

START_TEST(ranges_not_there_are_misses)
{
	char dir[64];
	const uint64_t size = 2 * BLK + 100;
	uint8_t *all = src_bytes(1, size);
	struct bfs_diskcache *c;
	struct bfs_dcobj *o;
	struct bfs_diskcache_stats st;

	test_mkdir(dir, sizeof(dir), "check_dc_miss");
	c = dc_open(dir, 0);
	o = dc_obj(c, 1, size);
	ck_assert_int_eq(get(o, all, 0, 10), -ENODATA);
	ck_assert(!bfs_dcobj_complete(o));
	put(o, all, 0, BLK); /* block 0 only */
	bfs_diskcache_flush(c);
	ck_assert_int_eq(get(o, all, 5, BLK - 5), 0);
	ck_assert_int_eq(get(o, all, BLK - 1, 2), -ENODATA); /* half in block 1 */
	ck_assert_int_eq(get(o, all, BLK, 1), -ENODATA);
	ck_assert_int_eq(get(o, all, 2 * BLK, 100), -ENODATA);
	ck_assert_int_eq(get(o, all, size - 10, 11), -ENODATA); /* past the end */
	ck_assert_int_eq(bfs_dcobj_read(o, NULL, 0, 0), 0);
	/* pieces smaller than a block are not kept, even when they add up */
	put(o, all, BLK, BLK / 2);
	put(o, all, BLK + BLK / 2, BLK / 2);
	/* nor a block a put starts inside of */
	put(o, all, BLK + 1, BLK - 1);
	bfs_diskcache_flush(c);
	ck_assert_int_eq(get(o, all, BLK, 10), -ENODATA);
	st = dc_stats(c);
	ck_assert_uint_eq(st.hits, 1);
	ck_assert_uint_eq(st.misses, 5); /* the read past the end is no lookup */
	ck_assert_uint_eq(st.bytes, BLK);
	ck_assert_uint_eq(st.corrupt, 0);
	bfs_diskcache_close(c);
	free(all);
	test_rmdir(dir);
}
END_TEST

START_TEST(short_last_block_only_when_the_put_reaches_the_end)
{
	char dir[64];
	const uint64_t size = 2 * BLK + 5000;
	uint8_t *all = src_bytes(2, size);
	struct bfs_diskcache *c;
	struct bfs_dcobj *o;

	test_mkdir(dir, sizeof(dir), "check_dc_short");
	c = dc_open(dir, 0);
	o = dc_obj(c, 2, size);
	put(o, all, 0, size - 1); /* one byte short of the end */
	bfs_diskcache_flush(c);
	ck_assert_int_eq(get(o, all, 0, 2 * BLK), 0);
	ck_assert_int_eq(get(o, all, 2 * BLK, 10), -ENODATA);
	ck_assert(!bfs_dcobj_complete(o));
	ck_assert_uint_eq(dc_stats(c).bytes, 2 * BLK);
	put(o, all, 2 * BLK + 1, size - 2 * BLK - 1); /* the end, not the block's start */
	bfs_diskcache_flush(c);
	ck_assert_int_eq(get(o, all, 2 * BLK, 10), -ENODATA);
	put(o, all, 2 * BLK - 7, size - 2 * BLK + 7); /* from before it to the end */
	bfs_diskcache_flush(c);
	ck_assert_int_eq(get(o, all, 2 * BLK, 5000), 0);
	ck_assert_int_eq(get(o, all, size - 1, 1), 0);
	ck_assert(bfs_dcobj_complete(o));
	ck_assert_uint_eq(dc_stats(c).bytes, size);
	bfs_diskcache_close(c);

	/* an object smaller than a page, and one of exactly two blocks */
	test_rmdir(dir);
	test_mkdir(dir, sizeof(dir), "check_dc_short");
	c = dc_open(dir, 0);
	{
		uint8_t *tiny = src_bytes(3, 100), *two = src_bytes(4, 2 * BLK);
		struct bfs_dcobj *t = dc_obj(c, 3, 100), *w = dc_obj(c, 4, 2 * BLK);

		put(t, tiny, 1, 99);
		put(w, two, 0, 2 * BLK);
		bfs_diskcache_flush(c);
		ck_assert_int_eq(get(t, tiny, 0, 100), -ENODATA);
		put(t, tiny, 0, 100);
		bfs_diskcache_flush(c);
		ck_assert_int_eq(get(t, tiny, 0, 100), 0);
		ck_assert_int_eq(get(w, two, 0, 2 * BLK), 0);
		ck_assert(bfs_dcobj_complete(t) && bfs_dcobj_complete(w));
		free(tiny);
		free(two);
	}
	bfs_diskcache_close(c);
	free(all);
	test_rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------- damage */

enum damage {
	D_FLIP, /* a byte of block 1 in .data */
	D_ZEROS, /* block 1 of .data all zeros */
	D_TRUNC, /* .data cut inside block 1 */
	D_TORN, /* half of block 1 overwritten by other bytes (a torn rewrite) */
	D_NO_BLOCKS, /* the .blocks file deleted */
	D_ENTRY, /* a page CRC of block 1 in the table */
	D_LEN, /* block 1's length word */
	D_ABSENT, /* block 1's present word cleared: a write that crashed before it */
	D_TABLE_CUT, /* the .blocks file cut inside block 1's entry */
	D_HEADER, /* a byte of the header (its name) */
	D_HEADER_CUT, /* the .blocks file cut inside its header */
	D_NDAMAGE
};

static const char *const damage_name[] = { "flip",	 "zeros",     "trunc",	   "torn",
					   "no .blocks", "entry crc", "length",	   "absent",
					   "table cut",	 "header",    "header cut" };

/* Whether a read meeting it counts as corrupt: damage to bytes the table
 * vouches for. A table that says nothing (deleted, cut, a block not
 * marked) is a plain miss. */
static bool counts_corrupt(enum damage d)
{
	return d == D_FLIP || d == D_ZEROS || d == D_TRUNC || d == D_TORN || d == D_ENTRY ||
	       d == D_HEADER;
}

/* Whether blocks other than block 1 still read. */
static bool others_survive(enum damage d)
{
	return d != D_NO_BLOCKS && d != D_HEADER && d != D_HEADER_CUT && d != D_TABLE_CUT;
}

static void do_damage(enum damage d, const char *data, const char *blocks)
{
	static uint8_t buf[BFS_DC_BLOCK];
	uint8_t z[4] = { 0 };

	switch (d) {
	case D_FLIP:
		flip(data, BLK + 123457);
		break;
	case D_ZEROS:
		memset(buf, 0, sizeof(buf));
		patch(data, BLK, buf, BLK);
		break;
	case D_TRUNC:
		ck_assert_int_eq(truncate(data, (off_t)(BLK + BLK / 2)), 0);
		break;
	case D_TORN:
		for (size_t i = 0; i < BLK / 2; i++)
			buf[i] = pat(99, i);
		patch(data, BLK + BLK / 4, buf, BLK / 2);
		break;
	case D_NO_BLOCKS:
		ck_assert_int_eq(unlink(blocks), 0);
		break;
	case D_ENTRY:
		flip(blocks, HDR + ENTRY + 8 + 4 * 17);
		break;
	case D_LEN:
		flip(blocks, HDR + ENTRY + 4);
		break;
	case D_ABSENT:
		patch(blocks, HDR + ENTRY, z, 4);
		break;
	case D_TABLE_CUT:
		ck_assert_int_eq(truncate(blocks, HDR + ENTRY + 100), 0);
		break;
	case D_HEADER:
		flip(blocks, 50); /* inside the object's name */
		break;
	case D_HEADER_CUT:
		ck_assert_int_eq(truncate(blocks, 1000), 0);
		break;
	default:
		ck_abort();
	}
}

/* A byte the damage touches (in block 1). */
static uint64_t damaged_at(enum damage d)
{
	switch (d) {
	case D_FLIP:
		return BLK + 123457;
	case D_TRUNC:
		return BLK + BLK / 2 + 100;
	case D_TORN:
		return BLK + BLK / 4 + 1000;
	case D_ENTRY:
		return BLK + 17 * BFS_DC_PAGE + 100;
	default:
		return BLK + 5000;
	}
}

/* Object 5: three blocks and a short one, written whole by cache c1,
 * damaged (while c1 is open and knows it, with `live`), then read by a
 * cache: never a wrong byte, a miss where the damage is, counted as
 * corrupt where it is corruption; put again, it reads back, here and in
 * the next mount. */
static void damage_case(enum damage d, bool live)
{
	char dir[64], data[PATH_MAX], blocks[PATH_MAX];
	const uint64_t size = 3 * BLK + 777;
	uint8_t *all = src_bytes(5, size);
	struct bfs_diskcache *c1, *c2;
	struct bfs_dcobj *o1, *o2;
	struct bfs_diskcache_stats st;

	test_mkdir(dir, sizeof(dir), "check_dc_dmg");
	obj_file(data, sizeof(data), dir, 5, size, ".data");
	obj_file(blocks, sizeof(blocks), dir, 5, size, ".blocks");
	c1 = dc_open(dir, 0);
	o1 = dc_obj(c1, 5, size);
	put(o1, all, 0, size);
	bfs_diskcache_flush(c1);
	ck_assert_msg(exists(data) && exists(blocks), "%s: the files are not where expected",
		      damage_name[d]);
	ck_assert_int_eq(get(o1, all, 0, size), 0); /* c1 knows every block */
	if (!live) {
		bfs_diskcache_close(c1);
		c1 = NULL;
	}
	do_damage(d, data, blocks);
	if (live) {
		c2 = c1;
		o2 = o1;
	} else {
		c2 = dc_open(dir, 0);
		o2 = dc_obj(c2, 5, size);
	}
	if (live && (d == D_NO_BLOCKS || d == D_ENTRY || d == D_LEN || d == D_ABSENT ||
		     d == D_TABLE_CUT || d == D_HEADER || d == D_HEADER_CUT)) {
		/* the table is read once: a mount that checked it goes on
		 * with what it read, against bytes that are still right */
		ck_assert_msg(get(o2, all, 0, size) == 0, "%s (live)", damage_name[d]);
		bfs_diskcache_close(c2);
		/* the next mount meets the damage */
		c2 = dc_open(dir, 0);
		o2 = dc_obj(c2, 5, size);
	}
	ck_assert_msg(get(o2, all, damaged_at(d) - 50, 100) == -ENODATA,
		      "%s%s: the damaged bytes served", damage_name[d], live ? " (live)" : "");
	ck_assert_msg(get(o2, all, BLK, BLK) == -ENODATA, "%s: block 1 served", damage_name[d]);
	if (others_survive(d)) {
		ck_assert_msg(get(o2, all, 0, BLK) == 0, "%s: block 0 lost", damage_name[d]);
		if (d != D_TRUNC)
			ck_assert_msg(get(o2, all, 3 * BLK, 777) == 0, "%s: the last block lost",
				      damage_name[d]);
	}
	st = dc_stats(c2);
	if (counts_corrupt(d))
		ck_assert_msg(st.corrupt >= 1, "%s%s: not counted as corrupt", damage_name[d],
			      live ? " (live)" : "");
	else
		ck_assert_msg(st.corrupt == 0, "%s: counted as corrupt (%" PRIu64 ")",
			      damage_name[d], st.corrupt);
	ck_assert(!bfs_dcobj_complete(o2) || d == D_FLIP || d == D_ZEROS || d == D_TORN);
	/* as the I/O stage does: each block read, fetched again on a miss,
	 * written again */
	for (uint64_t a = 0; a < size; a += BLK) {
		uint64_t n = size - a < BLK ? size - a : BLK;

		if (get(o2, all, a, n) != 0)
			put(o2, all, a, n);
	}
	bfs_diskcache_flush(c2);
	ck_assert_msg(get(o2, all, 0, size) == 0, "%s%s: not written again", damage_name[d],
		      live ? " (live)" : "");
	ck_assert_msg(dc_stats(c2).bytes >= BLK, "%s: nothing written again", damage_name[d]);
	ck_assert_msg(!strstr(notes.text, "writing stopped"), "%s: %s", damage_name[d], notes.text);
	bfs_diskcache_close(c2);
	/* and the next mount reads all of it from DIR */
	c2 = dc_open(dir, 0);
	o2 = dc_obj(c2, 5, size);
	ck_assert_msg(get(o2, all, 0, size) == 0, "%s: not kept for the next mount",
		      damage_name[d]);
	ck_assert(bfs_dcobj_complete(o2));
	bfs_diskcache_close(c2);
	free(all);
	test_rmdir(dir);
}

START_TEST(damage_between_mounts_is_a_miss_then_written_again)
{
	damage_case((enum damage)_i, false);
}
END_TEST

START_TEST(damage_under_a_live_cache_is_a_miss_then_written_again)
{
	damage_case((enum damage)_i, true);
}
END_TEST

/* Another object's table under this one's name (the hashes of two
 * identities met): not ours to use or to touch; a miss, not corruption,
 * and writing goes on for the other objects. */
START_TEST(another_objects_files_under_its_name_are_left_alone)
{
	char dir[64], ab[PATH_MAX], bb[PATH_MAX], bd[PATH_MAX];
	uint8_t *a = src_bytes(60, BLK), *b = src_bytes(61, BLK), *c3 = src_bytes(62, BLK);
	uint8_t *hdr, *after;
	size_t len;
	uint64_t hb = obj_hash(61, BLK);
	struct bfs_diskcache *c;
	struct bfs_dcobj *ob, *oc;

	test_mkdir(dir, sizeof(dir), "check_dc_coll");
	obj_file(ab, sizeof(ab), dir, 60, BLK, ".blocks");
	obj_file(bb, sizeof(bb), dir, 61, BLK, ".blocks");
	obj_file(bd, sizeof(bd), dir, 61, BLK, ".data");
	c = dc_open(dir, 0);
	put(dc_obj(c, 60, BLK), a, 0, BLK);
	bfs_diskcache_flush(c);
	bfs_diskcache_close(c);
	/* object 60's table, its hash field made 61's (as a collision
	 * would have it), and its bytes, under 61's names */
	hdr = test_slurp(ab, &len);
	ck_assert_uint_ge(len, HDR + ENTRY);
	for (int i = 0; i < 8; i++)
		hdr[40 + i] = (uint8_t)(hb >> (8 * i));
	{
		uint32_t crc = bfs_crc32c(0, hdr, HDR - 4);

		for (int i = 0; i < 4; i++)
			hdr[HDR - 4 + i] = (uint8_t)(crc >> (8 * i));
	}
	test_spit(bb, hdr, len);
	test_spit(bd, a, BLK);

	c = dc_open(dir, 0);
	ob = dc_obj(c, 61, BLK);
	oc = dc_obj(c, 62, BLK);
	ck_assert_int_eq(get(ob, b, 0, 100), -ENODATA);
	put(ob, b, 0, BLK);
	put(oc, c3, 0, BLK);
	bfs_diskcache_flush(c);
	ck_assert_int_eq(get(ob, b, 0, BLK), -ENODATA);
	ck_assert_int_eq(get(oc, c3, 0, BLK), 0);
	ck_assert_uint_eq(dc_stats(c).corrupt, 0);
	ck_assert_uint_eq(dc_stats(c).bytes, BLK);
	ck_assert_msg(notes.n == 0, "%s", notes.text);
	ck_assert(!bfs_dcobj_complete(ob));
	after = test_slurp(bb, &len);
	ck_assert(memcmp(after, hdr, HDR) == 0);
	bfs_diskcache_close(c);
	free(hdr);
	free(after);
	free(a);
	free(b);
	free(c3);
	test_rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------ the bound */

/* Another mount's objects (one that is gone: a job before) go least
 * recently used first when this mount needs their room; what it keeps
 * stays. */
START_TEST(the_least_recently_used_go_first_and_used_stays_within_the_bound)
{
	char dir[64], b[7][PATH_MAX], d[7][PATH_MAX];
	uint8_t *all[7];
	struct bfs_diskcache *c, *c0, *c2;
	struct bfs_dcobj *o[7];
	struct bfs_diskcache_stats st;
	time_t now = time(NULL);

	test_mkdir(dir, sizeof(dir), "check_dc_lru");
	for (unsigned i = 0; i < 7; i++) {
		all[i] = src_bytes(10 + i, BLK);
		obj_file(b[i], sizeof(b[i]), dir, 10 + i, BLK, ".blocks");
		obj_file(d[i], sizeof(d[i]), dir, 10 + i, BLK, ".data");
	}
	/* an earlier mount fills DIR with objects 0-3 */
	c0 = dc_open(dir, 4 * MiB);
	for (unsigned i = 0; i < 4; i++)
		o[i] = dc_obj(c0, 10 + i, BLK);
	for (unsigned i = 0; i < 4; i++)
		put(o[i], all[i], 0, BLK);
	bfs_diskcache_flush(c0);
	st = dc_stats(c0);
	ck_assert_uint_eq(st.used, 4 * MiB);
	ck_assert_uint_eq(st.kept, 4 * MiB);
	ck_assert_uint_eq(st.evictions, 0);
	bfs_diskcache_close(c0);
	/* as if used at these times: 0 first, then 2, 3, 1 */
	set_mtime(b[0], now - 400);
	set_mtime(b[1], now - 100);
	set_mtime(b[2], now - 300);
	set_mtime(b[3], now - 200);

	/* this mount keeps objects 4-6 (they fit) */
	c = dc_open(dir, 4 * MiB);
	for (unsigned i = 4; i < 7; i++)
		o[i] = dc_obj(c, 10 + i, BLK);
	ck_assert_uint_eq(dc_stats(c).limit, 4 * MiB);
	put(o[4], all[4], 0, BLK);
	bfs_diskcache_flush(c);
	st = dc_stats(c);
	ck_assert_uint_eq(st.evictions, 1);
	ck_assert(!exists(b[0]) && !exists(d[0]));
	ck_assert(exists(b[1]) && exists(b[2]) && exists(b[3]) && exists(b[4]));
	ck_assert_uint_le(st.used, st.limit);
	ck_assert_uint_le(du_data(dir), 4 * MiB);

	/* a read is a use: another mount reads 2, so 3 goes next, then 1 */
	c2 = dc_open(dir, 4 * MiB);
	ck_assert_int_eq(get(dc_obj(c2, 12, BLK), all[2], 0, BLK), 0);
	bfs_diskcache_close(c2);
	put(o[5], all[5], 0, BLK);
	bfs_diskcache_flush(c);
	ck_assert(!exists(b[3]) && exists(b[1]) && exists(b[2]));
	put(o[6], all[6], 0, BLK);
	bfs_diskcache_flush(c);
	ck_assert(!exists(b[1]) && exists(b[2]));
	st = dc_stats(c);
	ck_assert_uint_eq(st.evictions, 3);
	ck_assert_uint_le(st.used, st.limit);
	ck_assert_uint_le(du_data(dir), 4 * MiB);
	/* what is left reads */
	for (unsigned i = 4; i < 7; i++)
		ck_assert_int_eq(get(o[i], all[i], 0, BLK), 0);
	/* the last of the earlier mount's goes for a new object of this one
	 * (registered after: kept, as it fits), never one it keeps */
	struct bfs_dcobj *late = dc_obj(c, 17, BLK);
	uint8_t *lb = src_bytes(17, BLK);

	set_mtime(b[4], now - 5000); /* the oldest, and still kept */
	put(late, lb, 0, BLK);
	bfs_diskcache_flush(c);
	ck_assert(!exists(b[2]) && exists(b[4]) && exists(b[5]) && exists(b[6]));
	ck_assert_int_eq(get(late, lb, 0, BLK), 0);
	ck_assert_int_eq(get(o[4], all[4], 0, BLK), 0);
	ck_assert_uint_le(du_data(dir), 4 * MiB);
	bfs_diskcache_close(c);
	free(lb);
	for (unsigned i = 0; i < 7; i++)
		free(all[i]);
	test_rmdir(dir);
}
END_TEST

/* A dataset larger than the cache read again and again, in order (each
 * epoch of a cyclic scan) or in another order every pass (a block
 * shuffle): least-recently-used deletes each block just before its next
 * use, and a pass finds nothing; what the cache keeps is the same part in
 * every pass, at least 90% of the bound. A second mount of the same
 * dataset on the same DIR keeps the same part, so it finds it all. */
START_TEST(a_scan_over_four_times_the_cache_keeps_90_percent_of_it_useful)
{
	enum { NOBJS = 9, PASSES = 4 };
	const uint64_t size = 2 * MiB + 300 * 1024; /* a short last block each */
	const uint64_t limit = 5 * MiB;
	const uint64_t nb = (size + BLK - 1) / BLK;
	char dir[64];
	uint8_t *all[NOBJS];
	struct bfs_diskcache *c;
	struct bfs_dcobj *o[NOBJS];
	unsigned seed = 3;
	uint64_t order[NOBJS * 3];

	ck_assert_uint_ge(NOBJS * size, 4 * limit);
	test_mkdir(dir, sizeof(dir), "check_dc_scan");
	for (unsigned i = 0; i < NOBJS; i++)
		all[i] = src_bytes(200 + i, size);
	for (unsigned mount = 0; mount < 2; mount++) {
		c = dc_open(dir, limit);
		for (unsigned i = 0; i < NOBJS; i++)
			o[i] = dc_obj(c, 200 + i, size);
		for (unsigned p = 0; p < PASSES; p++) {
			uint64_t hit = 0;

			for (uint64_t k = 0; k < NOBJS * nb; k++)
				order[k] = k;
			if (_i == 1) /* another order each pass */
				for (uint64_t k = NOBJS * nb - 1; k > 0; k--) {
					uint64_t j = (uint64_t)rand_r(&seed) % (k + 1),
						 t = order[k];

					order[k] = order[j];
					order[j] = t;
				}
			for (uint64_t k = 0; k < NOBJS * nb; k++) {
				unsigned i = (unsigned)(order[k] / nb);
				uint64_t a = order[k] % nb * BLK,
					 n = size - a < BLK ? size - a : BLK;

				if (get(o[i], all[i], a, n) == 0) {
					hit += n;
				} else { /* fetched from the source, offered to the cache */
					put(o[i], all[i], a, n);
					bfs_diskcache_flush(c);
				}
			}
			struct bfs_diskcache_stats st = dc_stats(c);

			ck_assert_msg(st.used <= limit, "pass %u: used %" PRIu64, p, st.used);
			ck_assert_uint_le(du_data(dir), limit);
			if (p > 0 || mount > 0)
				ck_assert_msg(hit * 10 >= limit * 9,
					      "mount %u pass %u: %" PRIu64 " bytes of a %" PRIu64
					      "-byte cache served (evictions %" PRIu64 ")",
					      mount, p, hit, limit, st.evictions);
		}
		if (mount > 0)
			ck_assert_uint_eq(dc_stats(c).bytes, 0); /* nothing written again */
		bfs_diskcache_close(c);
	}
	for (unsigned i = 0; i < NOBJS; i++)
		free(all[i]);
	test_rmdir(dir);
}
END_TEST

/* Each object written by a mount of its own (as jobs one after another):
 * whatever their sizes, the .data files stay within the bound, the last
 * one is kept whole when it fits, and what an object larger than the bound
 * keeps is within it. */
START_TEST(objects_of_every_size_stay_within_the_bound)
{
	char dir[64];
	const uint64_t limit = 5 * MiB + 300 * 1024;
	unsigned seed = 11;
	uint64_t evictions = 0;

	test_mkdir(dir, sizeof(dir), "check_dc_bound");
	for (unsigned i = 0; i < 40; i++) {
		/* odd sizes: short last blocks, and a few past the bound */
		uint64_t size = (uint64_t)(rand_r(&seed) % (7 * BLK)) + 1 + (i % 3) * 4099;
		uint8_t *all = src_bytes(100 + i, size);
		struct bfs_diskcache *c = dc_open(dir, limit);
		struct bfs_dcobj *o = dc_obj(c, 100 + i, size);
		struct bfs_diskcache_stats st;

		put(o, all, 0, size);
		bfs_diskcache_flush(c);
		st = dc_stats(c);
		ck_assert_msg(st.used <= limit, "object %u: used %" PRIu64 " > %" PRIu64, i,
			      st.used, limit);
		ck_assert_msg(du_data(dir) <= limit,
			      "object %u: the .data files take %" PRIu64 " > %" PRIu64, i,
			      du_data(dir), limit);
		if (size <= limit)
			ck_assert_msg(get(o, all, 0, size) == 0,
				      "object %u (%" PRIu64 " bytes) not kept; used %" PRIu64
				      ", evictions %" PRIu64,
				      i, size, st.used, st.evictions);
		else
			ck_assert_msg(st.kept <= limit && st.kept + BLK > limit / 64 * 63 &&
					      get(o, all, 0, st.kept) == 0,
				      "object %u (%" PRIu64 " bytes): kept %" PRIu64, i, size,
				      st.kept);
		evictions += st.evictions;
		bfs_diskcache_close(c);
		free(all);
	}
	ck_assert_uint_gt(evictions, 10);
	test_rmdir(dir);
}
END_TEST

/* ---------------------------------------------------- two mounts at once */

#define NOBJ 3
static const uint64_t sizes[NOBJ] = { 3 * BLK + 4097, 2 * BLK, 5 * BLK / 2 };

struct shared {
	const char *dir;
	uint8_t *all[NOBJ];
	atomic_bool stop;
	atomic_ulong wrong, hits, misses, drops;
};

struct worker {
	struct shared *sh;
	struct bfs_diskcache *c;
	struct bfs_dcobj **o;
	unsigned seed;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	uint8_t *buf = malloc(2 * BLK);

	ck_assert_ptr_nonnull(buf);
	while (!atomic_load(&sh->stop)) {
		unsigned k = (unsigned)rand_r(&w->seed) % NOBJ;
		uint64_t size = sizes[k];
		uint64_t off = (uint64_t)rand_r(&w->seed) % size;
		uint64_t n = 1 + (uint64_t)rand_r(&w->seed) %
					 (size - off < 2 * BLK ? size - off : 2 * BLK);
		int rc;

		if (rand_r(&w->seed) % 200 == 0) {
			bfs_dcobj_drop(w->o[k]);
			atomic_fetch_add(&sh->drops, 1);
			continue;
		}
		rc = bfs_dcobj_read(w->o[k], buf, (size_t)n, off);
		if (rc == 0) {
			atomic_fetch_add(&sh->hits, 1);
			if (memcmp(buf, sh->all[k] + off, n) != 0)
				atomic_fetch_add(&sh->wrong, 1);
		} else {
			/* fetched from the source: the blocks around it */
			uint64_t a = off / BLK * BLK, b = (off + n + BLK - 1) / BLK * BLK;

			atomic_fetch_add(&sh->misses, 1);
			if (b > size)
				b = size;
			bfs_dcobj_put(w->o[k], sh->all[k] + a, (size_t)(b - a), a);
		}
	}
	free(buf);
	return NULL;
}

/* Garbage into the .data files now and then, as a disk might. */
static void *vandal(void *arg)
{
	struct shared *sh = arg;
	unsigned seed = 5;

	while (!atomic_load(&sh->stop)) {
		char path[PATH_MAX];
		unsigned k = (unsigned)rand_r(&seed) % NOBJ;
		int fd;

		obj_file(path, sizeof(path), sh->dir, 20 + k, sizes[k], ".data");
		fd = open(path, O_WRONLY);
		if (fd >= 0) {
			uint8_t junk[64];

			for (size_t i = 0; i < sizeof(junk); i++)
				junk[i] = (uint8_t)rand_r(&seed);
			(void)!pwrite(fd, junk, 1 + (size_t)rand_r(&seed) % sizeof(junk),
				      (off_t)((uint64_t)rand_r(&seed) % sizes[k]));
			close(fd);
		}
		usleep(20000);
	}
	return NULL;
}

START_TEST(two_mounts_on_one_dir_never_serve_wrong_bytes)
{
	char dir[64];
	struct shared sh = { 0 };
	struct bfs_diskcache *c[2];
	struct bfs_dcobj *o[2][NOBJ];
	struct worker w[6];
	pthread_t t[6], v;
	struct bfs_diskcache_stats s0, s1;

	test_mkdir(dir, sizeof(dir), "check_dc_two");
	sh.dir = dir;
	for (unsigned k = 0; k < NOBJ; k++)
		sh.all[k] = src_bytes(20 + k, sizes[k]);
	/* the second is bounded below the objects' total: it evicts what
	 * both use */
	c[0] = dc_open(dir, 0);
	for (unsigned k = 0; k < NOBJ; k++)
		o[0][k] = dc_obj(c[0], 20 + k, sizes[k]);
	/* the second keeps the first two objects (63/64 of its bound), not
	 * the third, which the first mount has written whole: the second
	 * evicts it as soon as it writes */
	bfs_dcobj_put(o[0][NOBJ - 1], sh.all[NOBJ - 1], (size_t)sizes[NOBJ - 1], 0);
	bfs_diskcache_flush(c[0]);
	c[1] = dc_open(dir, 6 * MiB);
	for (unsigned k = 0; k < NOBJ; k++)
		o[1][k] = dc_obj(c[1], 20 + k, sizes[k]);
	ck_assert_uint_eq(bfs_dcobj_kept(o[1][NOBJ - 1]), 0);
	for (unsigned i = 0; i < 6; i++) {
		w[i] = (struct worker){ .sh = &sh, .c = c[i % 2], .o = o[i % 2], .seed = 100 + i };
		ck_assert_int_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	ck_assert_int_eq(pthread_create(&v, NULL, vandal, &sh), 0);
	usleep(2500 * 1000);
	atomic_store(&sh.stop, true);
	for (unsigned i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	pthread_join(v, NULL);
	bfs_diskcache_flush(c[0]);
	bfs_diskcache_flush(c[1]);
	s0 = dc_stats(c[0]);
	s1 = dc_stats(c[1]);
	ck_assert_msg(atomic_load(&sh.wrong) == 0, "%lu wrong reads", atomic_load(&sh.wrong));
	ck_assert_msg(s0.hits > 10 && s1.hits > 10, "hits %" PRIu64 " %" PRIu64, s0.hits, s1.hits);
	ck_assert_uint_gt(s1.evictions, 0);
	ck_assert_uint_gt(s0.corrupt + s1.corrupt, 0); /* the vandal was met */
	/* when it is all over, what is there still reads right */
	for (unsigned m = 0; m < 2; m++)
		for (unsigned k = 0; k < NOBJ; k++) {
			bfs_dcobj_put(o[m][k], sh.all[k], (size_t)sizes[k], 0);
			bfs_diskcache_flush(c[m]);
			(void)get(o[m][k], sh.all[k], 0, sizes[k]);
		}
	bfs_diskcache_close(c[0]);
	bfs_diskcache_close(c[1]);
	for (unsigned k = 0; k < NOBJ; k++)
		free(sh.all[k]);
	test_rmdir(dir);
}
END_TEST

/* verify takes the object's lock, and counts what it finds bad; the
 * writer evicting that object at the same time must not deadlock with
 * it. */
struct verifier {
	struct bfs_dcobj *o;
	atomic_bool done;
};

static void *verify_thread(void *arg)
{
	struct verifier *vt = arg;
	const char *path;

	(void)bfs_dcobj_verify(vt->o, &path);
	atomic_store(&vt->done, true);
	return NULL;
}

START_TEST(verify_and_eviction_at_once_do_not_deadlock)
{
	enum { ROUNDS = 20 };
	char dir[64], data[PATH_MAX], blocks[PATH_MAX];
	const uint64_t big = 24 * BLK;
	uint8_t *all = src_bytes(30, big), *one = src_bytes(31, BLK);

	test_mkdir(dir, sizeof(dir), "check_dc_dead");
	obj_file(data, sizeof(data), dir, 30, big, ".data");
	obj_file(blocks, sizeof(blocks), dir, 30, big, ".blocks");
	for (unsigned round = 0; round < ROUNDS; round++) {
		struct bfs_diskcache *c, *cx = dc_open(dir, 0);
		struct bfs_dcobj *x, *y[ROUNDS];
		struct bfs_dcobj *xx = dc_obj(cx, 30, big);
		pthread_t t;
		struct timespec until;

		put(xx, all, 0, big);
		bfs_diskcache_flush(cx);
		ck_assert_msg(bfs_dcobj_complete(xx), "round %u: x not whole", round);
		bfs_diskcache_close(cx);
		/* this mount keeps its y objects (registered first: 63/64 of
		 * the bound is just over them) and not x, which the other one
		 * wrote whole: its write of a y evicts x, whose lock verify
		 * holds */
		c = dc_open(dir, (ROUNDS * BLK + BLK / 2) / 63 * 64);
		for (unsigned k = 0; k < ROUNDS; k++)
			y[k] = dc_obj(c, 1000 + k, BLK);
		x = dc_obj(c, 30, big);
		ck_assert_uint_eq(bfs_dcobj_kept(x), 0);
		ck_assert_msg(bfs_dcobj_complete(x), "round %u: x not whole here", round);
		struct verifier vt = { .o = x };

		/* x the oldest, its last block bad: verify reads it all, then
		 * meets the bad block while y's write evicts x */
		set_mtime(blocks, time(NULL) - 1000);
		flip(data, big - 10);
		ck_assert_int_eq(pthread_create(&t, NULL, verify_thread, &vt), 0);
		usleep(1000);
		put(y[round], one, 0, BLK);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 10;
		ck_assert_msg(pthread_timedjoin_np(t, NULL, &until) == 0,
			      "round %u: verify and the writer's eviction deadlocked", round);
		bfs_diskcache_flush(c);
		ck_assert(!exists(data) || !bfs_dcobj_complete(x));
		ck_assert_uint_eq(dc_stats(c).evictions, 1);
		for (unsigned k = 0; k <= round; k++)
			ck_assert_msg(get(y[k], one, 0, BLK) == 0, "round %u: y %u", round, k);
		bfs_diskcache_close(c);
	}
	free(all);
	free(one);
	test_rmdir(dir);
}
END_TEST

/* --------------------------------------------------- complete and verify */

struct completions {
	pthread_mutex_t m;
	void *user[16];
	int n;
};

static void on_complete(void *ctx, void *user)
{
	struct completions *cp = ctx;

	pthread_mutex_lock(&cp->m);
	if (cp->n < 16)
		cp->user[cp->n] = user;
	cp->n++;
	pthread_mutex_unlock(&cp->m);
}

START_TEST(complete_and_verify)
{
	char dir[64], data[PATH_MAX];
	const uint64_t size = 2 * BLK + 3;
	uint8_t *all = src_bytes(40, size);
	struct bfs_diskcache *c;
	struct bfs_dcobj *o;
	struct completions cp = { .m = PTHREAD_MUTEX_INITIALIZER };
	const char *path = NULL;
	size_t len;
	uint8_t *copy;

	test_mkdir(dir, sizeof(dir), "check_dc_verify");
	obj_file(data, sizeof(data), dir, 40, size, ".data");
	c = dc_open(dir, 0);
	bfs_diskcache_set_complete(c, on_complete, &cp);
	o = dc_obj(c, 40, size);
	ck_assert(!bfs_dcobj_complete(o));
	ck_assert(!bfs_dcobj_verify(o, &path));
	put(o, all, 0, 2 * BLK);
	bfs_diskcache_flush(c);
	ck_assert(!bfs_dcobj_complete(o));
	ck_assert(!bfs_dcobj_verify(o, &path));
	ck_assert_ptr_null(path);
	ck_assert_int_eq(cp.n, 0);
	put(o, all, 2 * BLK - 1, 4);
	bfs_diskcache_flush(c);
	ck_assert_int_eq(cp.n, 1);
	ck_assert_ptr_eq(cp.user[0], (void *)(uintptr_t)41);
	ck_assert(bfs_dcobj_complete(o));
	ck_assert(bfs_dcobj_verify(o, &path));
	ck_assert_str_eq(path, data);
	copy = test_slurp(path, &len);
	ck_assert_uint_eq(len, size);
	ck_assert(memcmp(copy, all, size) == 0);
	free(copy);

	/* a bad byte anywhere: complete (the table says so) until verify
	 * reads it; then not, counted, and written again when put */
	flip(data, BLK + 9999);
	ck_assert(!bfs_dcobj_verify(o, &path));
	ck_assert_uint_eq(dc_stats(c).corrupt, 1);
	ck_assert(!bfs_dcobj_complete(o));
	put(o, all, 0, size);
	bfs_diskcache_flush(c);
	ck_assert_int_eq(cp.n, 2);
	ck_assert(bfs_dcobj_verify(o, &path));
	ck_assert_int_eq(get(o, all, 0, size), 0);

	/* the last page bad, the object cut short */
	flip(data, size - 1);
	ck_assert(!bfs_dcobj_verify(o, &path));
	put(o, all, 0, size);
	bfs_diskcache_flush(c);
	ck_assert(bfs_dcobj_verify(o, &path));
	ck_assert_int_eq(truncate(data, (off_t)size - 1), 0);
	ck_assert(!bfs_dcobj_verify(o, &path));
	ck_assert_uint_eq(dc_stats(c).corrupt, 3);

	/* drop: the files go; the next put makes them again */
	put(o, all, 0, size);
	bfs_diskcache_flush(c);
	ck_assert(bfs_dcobj_verify(o, &path));
	bfs_dcobj_drop(o);
	ck_assert(!exists(data));
	ck_assert(!bfs_dcobj_complete(o));
	ck_assert_int_eq(get(o, all, 0, 10), -ENODATA);
	put(o, all, 0, size);
	bfs_diskcache_flush(c);
	ck_assert(bfs_dcobj_verify(o, &path));
	bfs_diskcache_set_complete(c, NULL, NULL);
	bfs_diskcache_close(c);
	free(all);
	test_rmdir(dir);
}
END_TEST

/* ------------------------------------------------- a DIR that cannot be */

static void one_line_naming(int rc, int want, const char *dir)
{
	const char *msg = bfs_err_msg();

	ck_assert_msg(rc == want, "%s: %d (%s), want %d", dir, rc, msg, want);
	ck_assert_msg(strstr(msg, "disk_cache=") && strstr(msg, dir), "message: %s", msg);
	ck_assert_msg(!strchr(msg, '\n'), "message of more than one line: %s", msg);
}

START_TEST(dir_that_cannot_be_the_cache_fails_check_with_one_line)
{
	char top[64], p[PATH_MAX], file[256], ro[256], src[256];
	struct bfs_diskcache *c = (struct bfs_diskcache *)1;
	struct bfs_diskcache_opts o = { 0 };

	test_mkdir(top, sizeof(top), "check_dc_dir");
	/* missing, parents and all: made */
	snprintf(p, sizeof(p), "%s/a/b/c", top);
	ck_assert_msg(bfs_diskcache_check(p) == 0, "%s", bfs_err_msg());
	ck_assert(exists(p));
	/* under a file, or a file itself */
	snprintf(file, sizeof(file), "%s/file", top);
	test_spit(file, (const uint8_t *)"x", 1);
	snprintf(p, sizeof(p), "%s/file/cache", top);
	one_line_naming(bfs_diskcache_check(p), -ENOTDIR, p);
	o.dir = p;
	ck_assert_int_eq(bfs_diskcache_open(&c, &o), -ENOTDIR);
	ck_assert_ptr_null(c);
	one_line_naming(bfs_diskcache_check(file), -ENOTDIR, file);
	/* read-only: a read-only bind mount (root passes a mode of 0555) */
	snprintf(src, sizeof(src), "%s/rw", top);
	snprintf(ro, sizeof(ro), "%s/ro", top);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	ck_assert_int_eq(mkdir(ro, 0755), 0);
	if (mount(src, ro, NULL, MS_BIND, NULL) == 0) {
		ck_assert_msg(remount_ro(ro) == 0, "remount: %s", strerror(errno));
		{
			one_line_naming(bfs_diskcache_check(ro), -EROFS, ro);
			snprintf(p, sizeof(p), "%s/sub", ro);
			one_line_naming(bfs_diskcache_check(p), -EROFS, p);
			o.dir = ro;
			ck_assert_int_eq(bfs_diskcache_open(&c, &o), -EROFS);
		}
		ck_assert_int_eq(umount(ro), 0);
	} else if (geteuid() != 0) {
		/* no root: a mode does it */
		ck_assert_int_eq(chmod(src, 0555), 0);
		one_line_naming(bfs_diskcache_check(src), -EACCES, src);
		chmod(src, 0755);
	}
	test_rmdir(top);
}
END_TEST

/* Set or clear the immutable flag of path (chattr +i): even root cannot
 * make a file in an immutable directory. 0, or -1 (no such flag here). */
static int immutable(const char *path, bool on)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY), fl = 0, rc = -1;

	if (fd < 0)
		return -1;
	if (ioctl(fd, FS_IOC_GETFLAGS, &fl) == 0) {
		fl = on ? fl | FS_IMMUTABLE_FL : fl & ~FS_IMMUTABLE_FL;
		rc = ioctl(fd, FS_IOC_SETFLAGS, &fl);
	}
	close(fd);
	return rc;
}

/* DIR stops taking files under the mount (made immutable): one note
 * naming the reason, reads of what it holds go on, nothing wrong. */
START_TEST(a_dir_that_stops_taking_files_stops_writing_with_one_note)
{
	char dir[64];
	const uint64_t size = 2 * BLK;
	uint8_t *a = src_bytes(50, size), *b = src_bytes(51, size);
	struct bfs_diskcache *c;
	struct bfs_dcobj *oa, *ob;
	bool on;

	test_mkdir(dir, sizeof(dir), "check_dc_stops");
	c = dc_open(dir, 0);
	oa = dc_obj(c, 50, size);
	ob = dc_obj(c, 51, size);
	put(oa, a, 0, size);
	bfs_diskcache_flush(c);
	on = immutable(dir, true) == 0;
	if (on) {
		notes.text[0] = '\0';
		notes.n = 0;
		put(ob, b, 0, size);
		bfs_diskcache_flush(c);
		put(ob, b, 0, size);
		bfs_diskcache_flush(c);
		ck_assert_int_eq(get(oa, a, 0, size), 0);
		ck_assert_int_eq(get(ob, b, 0, size), -ENODATA);
		ck_assert_msg(notes.n == 1 && strstr(notes.text, "writing stopped") &&
				      strstr(notes.text, dir),
			      "%s", notes.text);
		ck_assert_msg(strstr(notes.text, strerror(EPERM)), "not the reason: %s",
			      notes.text);
		ck_assert_int_eq(dc_stats(c).bytes, size);
		ck_assert_int_eq(immutable(dir, false), 0);
	}
	bfs_diskcache_close(c);
	free(a);
	free(b);
	test_rmdir(dir);
}
END_TEST

/* A mount that reads a share of the dataset (partitions) keeps the blocks
 * of its share, objects and blocks in order while they fit, not the first
 * objects: with a bound of 4 MiB over 3 objects of 3 MiB and a share of
 * block 1 of object 0 and blocks 0, 2 of object 2, those are kept (and
 * only those written), and kept_at says so in runs. */
START_TEST(a_share_is_kept_rather_than_the_first_objects)
{
	char dir[64];
	uint8_t *all[3];
	struct bfs_diskcache *c;
	struct bfs_dcobj *o[3];
	struct bfs_diskcache_stats st;
	uint64_t end;

	test_mkdir(dir, sizeof(dir), "check_dc_share");
	c = dc_open(dir, 4 * MiB);
	for (unsigned i = 0; i < 3; i++) {
		all[i] = src_bytes(70 + i, 3 * BLK);
		o[i] = dc_obj(c, 70 + i, 3 * BLK);
	}
	/* without a share: the first objects (object 0 whole, then blocks) */
	ck_assert_uint_eq(bfs_dcobj_kept(o[0]), 3 * BLK);
	ck_assert_uint_eq(bfs_dcobj_kept(o[2]), 0);
	bfs_dcobj_share(o[0], BLK + 10, 100); /* a piece inside block 1 */
	bfs_dcobj_share(o[2], 0, BLK / 2);
	bfs_dcobj_share(o[2], 2 * BLK + 5, BLK - 5);
	ck_assert(!bfs_dcobj_kept_at(o[0], 0, &end));
	ck_assert_uint_eq(end, BLK);
	ck_assert(bfs_dcobj_kept_at(o[0], BLK + 3, &end));
	ck_assert_uint_eq(end, 2 * BLK);
	ck_assert(!bfs_dcobj_kept_at(o[1], 0, &end));
	ck_assert_uint_eq(end, 3 * BLK);
	ck_assert(bfs_dcobj_kept_at(o[2], 0, &end));
	ck_assert_uint_eq(end, BLK);
	ck_assert(bfs_dcobj_kept_at(o[2], 2 * BLK, &end));
	ck_assert_uint_eq(end, 3 * BLK);
	for (unsigned i = 0; i < 3; i++)
		put(o[i], all[i], 0, 3 * BLK);
	bfs_diskcache_flush(c);
	st = dc_stats(c);
	ck_assert_uint_eq(st.kept, 3 * BLK);
	ck_assert_uint_eq(st.bytes, 3 * BLK);
	ck_assert_int_eq(get(o[0], all[0], BLK + 10, 100), 0);
	ck_assert_int_eq(get(o[2], all[2], 2 * BLK, BLK), 0);
	ck_assert_int_eq(get(o[0], all[0], 0, 10), -ENODATA);
	ck_assert_int_eq(get(o[1], all[1], 0, 10), -ENODATA);
	bfs_diskcache_close(c);
	for (unsigned i = 0; i < 3; i++)
		free(all[i]);
}
END_TEST

/* A node's share larger than its cache, on a disk an earlier mount filled
 * with the first object: the share's blocks are kept in order while they
 * fit (3 of its 5, the bound less its slack); the earlier mount's blocks
 * go to make room for them, though their object holds one of the share
 * (kept, so never deleted whole: without the trim, 1 block was written);
 * and the node's next mount, given the same share, reads them from DIR
 * without a write. */
START_TEST(a_share_larger_than_the_cache_keeps_its_first_blocks_over_a_later_mount)
{
	char dir[64];
	uint8_t *all[2];
	struct bfs_diskcache *c;
	struct bfs_dcobj *o[2];
	struct bfs_diskcache_stats st;

	test_mkdir(dir, sizeof(dir), "check_dc_share_big");
	for (unsigned i = 0; i < 2; i++)
		all[i] = src_bytes(80 + i, 4 * BLK);
	/* an earlier mount without a share: the first object's blocks */
	c = dc_open(dir, 4 * MiB);
	for (unsigned i = 0; i < 2; i++)
		o[i] = dc_obj(c, 80 + i, 4 * BLK);
	for (unsigned i = 0; i < 2; i++)
		put(o[i], all[i], 0, 4 * BLK);
	bfs_diskcache_flush(c);
	ck_assert_uint_eq(dc_stats(c).bytes, 3 * BLK);
	bfs_diskcache_close(c);

	/* the node's mounts: its share is object 1 and block 3 of object 0 */
	for (unsigned round = 0; round < 2; round++) {
		c = dc_open(dir, 4 * MiB);
		for (unsigned i = 0; i < 2; i++)
			o[i] = dc_obj(c, 80 + i, 4 * BLK);
		bfs_dcobj_share(o[1], 0, 4 * BLK);
		bfs_dcobj_share(o[0], 3 * BLK, BLK);
		/* object 0 first (registered first): its block 3, then the
		 * first two blocks of object 1 */
		ck_assert_uint_eq(dc_stats(c).kept, 3 * BLK);
		if (round == 0)
			for (unsigned i = 0; i < 2; i++)
				put(o[i], all[i], 0, 4 * BLK);
		bfs_diskcache_flush(c);
		st = dc_stats(c);
		ck_assert_uint_eq(st.bytes, round == 0 ? 3 * BLK : 0);
		ck_assert_uint_eq(st.evictions, 0); /* object 0 is kept: its other blocks go */
		ck_assert_uint_le(du_data(dir), 4 * MiB);
		ck_assert_int_eq(get(o[0], all[0], 3 * BLK, BLK), 0);
		ck_assert_int_eq(get(o[1], all[1], 0, 2 * BLK), 0);
		ck_assert_int_eq(get(o[0], all[0], 0, 10), -ENODATA);
		ck_assert_int_eq(get(o[1], all[1], 2 * BLK, 10), -ENODATA);
		bfs_diskcache_close(c);
	}
	for (unsigned i = 0; i < 2; i++)
		free(all[i]);
	test_rmdir(dir);
}
END_TEST

static Suite *diskcache_suite(void)
{
	Suite *s = suite_create("diskcache");
	TCase *t = tcase_create("cache");
	TCase *d = tcase_create("damage");
	TCase *b = tcase_create("bound");
	TCase *m = tcase_create("mounts");

	tcase_add_test(t, put_then_read_round_trips);
	tcase_add_test(t, ranges_not_there_are_misses);
	tcase_add_test(t, holds_knows_dir_at_once_and_blocks_queued);
	tcase_add_test(t, short_last_block_only_when_the_put_reaches_the_end);
	tcase_add_test(t, complete_and_verify);
	tcase_add_test(t, dir_that_cannot_be_the_cache_fails_check_with_one_line);
	tcase_add_test(t, a_dir_that_stops_taking_files_stops_writing_with_one_note);
	tcase_set_timeout(t, 30);
	suite_add_tcase(s, t);
	tcase_add_loop_test(d, damage_between_mounts_is_a_miss_then_written_again, 0, D_NDAMAGE);
	tcase_add_loop_test(d, damage_under_a_live_cache_is_a_miss_then_written_again, 0,
			    D_NDAMAGE);
	tcase_add_test(d, another_objects_files_under_its_name_are_left_alone);
	tcase_set_timeout(d, 30);
	suite_add_tcase(s, d);
	tcase_add_test(b, the_least_recently_used_go_first_and_used_stays_within_the_bound);
	tcase_add_test(b, objects_of_every_size_stay_within_the_bound);
	tcase_add_test(b, a_share_is_kept_rather_than_the_first_objects);
	tcase_add_test(b, a_share_larger_than_the_cache_keeps_its_first_blocks_over_a_later_mount);
	tcase_add_loop_test(b, a_scan_over_four_times_the_cache_keeps_90_percent_of_it_useful, 0,
			    2);
	tcase_set_timeout(b, 60);
	suite_add_tcase(s, b);
	tcase_add_test(m, two_mounts_on_one_dir_never_serve_wrong_bytes);
	tcase_add_test(m, verify_and_eviction_at_once_do_not_deadlock);
	tcase_set_timeout(m, 60);
	suite_add_tcase(s, m);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(diskcache_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
