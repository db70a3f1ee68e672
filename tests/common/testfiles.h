/* SPDX-License-Identifier: Apache-2.0 */
/*
 * testfiles.h — files for the unit tests: a scratch directory, a whole
 * file read into memory, bytes written to a file, one TFRecord record, a
 * pack's entry count, a file's inode.
 * Each failure is a libcheck assertion, so a test never goes on with a
 * half-made file.
 */
#ifndef BFS_TESTS_TESTFILES_H
#define BFS_TESTS_TESTFILES_H

#include "crc32c.h"
#include "ixpack.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* mkdtemp under /tmp with a test's prefix: dir gets the path. */
static inline void test_mkdir(char *dir, size_t cap, const char *prefix)
{
	snprintf(dir, cap, "/tmp/%s_XXXXXX", prefix);
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static inline void test_rmdir(const char *dir)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* The whole file, malloc'd (one spare byte), its length in *len. */
static inline uint8_t *test_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	ck_assert_int_ge(n, 0);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static inline void test_spit(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(p, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
}

/* How many entries the index/counts pack at path holds (it must load). */
static inline uint64_t test_pack_entries(const char *pack)
{
	struct bfs_ixpack *pk = NULL;
	char why[256];
	uint64_t n;

	ck_assert_msg(bfs_ixpack_load(&pk, pack, why, sizeof(why)) == BFS_INDEX_LOADED, "%s", why);
	n = bfs_ixpack_count(pk);
	bfs_ixpack_free(pk);
	return n;
}

/* The inode of path: a file rewritten by rename gets a new one. */
static inline ino_t test_ino(const char *path)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_ino;
}

/* One TFRecord record (length, masked CRCs) appended to f. */
static inline void test_put_record(FILE *f, const uint8_t *data, uint32_t len)
{
	uint8_t hdr[12], foot[4];
	uint64_t l = len;
	uint32_t c;

	memcpy(hdr, &l, 8);
	c = bfs_crc32c_mask(bfs_crc32c(0, hdr, 8));
	memcpy(hdr + 8, &c, 4);
	c = bfs_crc32c_mask(bfs_crc32c(0, data, len));
	memcpy(foot, &c, 4);
	ck_assert_uint_eq(fwrite(hdr, 1, 12, f), 12);
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	ck_assert_uint_eq(fwrite(foot, 1, 4, f), 4);
}

#endif
