/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_record.c — unit tests for crc32c.c and record.c: CRC vectors, framing
 * of generated plain/gzip/zlib shards, detection, every error path, random
 * and concurrent access through seek points. The shared real shards are
 * check_realdata.c's.
 *
 * Shards are written by a small writer in this file (zlib's gzip/compress
 * APIs for the compressed ones) into a temporary directory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "crc32c.h"
#include "decodertest.h"
#include "fdcache.h"
#include "record.h"
#include "record_impl.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char tmpdir[256];

/* ---- helpers ----------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void rng_seed(uint64_t s)
{
	rng_state = s * 0x9e3779b97f4a7c15ull + 1;
}

static const char *tmp_path(const char *name)
{
	static char buf[512];
	snprintf(buf, sizeof(buf), "%s/%s", tmpdir, name);
	return buf;
}

static void write_file(const char *path, const void *buf, size_t n)
{
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
}

static uint8_t *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long sz;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)sz + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)sz, f), (size_t)sz);
	fclose(f);
	*n = (size_t)sz;
	return buf;
}

/* A set of generated records. */
struct recs {
	size_t n;
	uint8_t **data;
	uint32_t *len;
};

/* n records of random length in [0, maxlen]; entropy 0: compressible text-like,
 * 1: random bytes. */
static void recs_gen(struct recs *r, size_t n, uint32_t maxlen, uint64_t seed, int entropy)
{
	rng_seed(seed);
	r->n = n;
	r->data = calloc(n, sizeof(*r->data));
	r->len = calloc(n, sizeof(*r->len));
	for (size_t i = 0; i < n; i++) {
		uint32_t len = (uint32_t)(rng() % ((uint64_t)maxlen + 1));
		r->len[i] = len;
		r->data[i] = malloc(len ? len : 1);
		for (uint32_t k = 0; k < len; k++) {
			uint64_t v = rng();
			r->data[i][k] = entropy ? (uint8_t)v : (uint8_t)("abcdefgh ijk\n"[v % 13]);
		}
	}
}

static void recs_free(struct recs *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->data[i]);
	free(r->data);
	free(r->len);
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Frame one record (header + data + footer) into p; returns bytes written. */
static size_t frame_one(uint8_t *p, const uint8_t *data, uint64_t len)
{
	put_le64(p, len);
	put_le32(p + 8, bfs_crc32c_mask(bfs_crc32c(0, p, 8)));
	memcpy(p + 12, data, len);
	put_le32(p + 12 + len, bfs_crc32c_mask(bfs_crc32c(0, data, len)));
	return 16 + len;
}

/* The uncompressed record stream of r. */
static uint8_t *recs_frame(const struct recs *r, size_t *n)
{
	size_t total = 0, pos = 0;
	uint8_t *buf;

	for (size_t i = 0; i < r->n; i++)
		total += 16 + r->len[i];
	buf = malloc(total + 1);
	for (size_t i = 0; i < r->n; i++)
		pos += frame_one(buf + pos, r->data[i], r->len[i]);
	*n = total;
	return buf;
}

enum wkind { W_PLAIN, W_GZIP, W_ZLIB, W_GZIP2 };

static void write_gzip(const char *path, const uint8_t *buf, size_t n)
{
	gzFile g = gzopen(path, "wb6");
	ck_assert_ptr_nonnull(g);
	while (n) {
		unsigned k = n > (1u << 20) ? (1u << 20) : (unsigned)n;
		ck_assert_int_eq(gzwrite(g, buf, k), (int)k);
		buf += k;
		n -= k;
	}
	ck_assert_int_eq(gzclose(g), Z_OK);
}

/* Write stream buf[0..n) to path in the given container. */
static void write_shard(const char *path, enum wkind kind, const uint8_t *buf, size_t n)
{
	switch (kind) {
	case W_PLAIN:
		write_file(path, buf, n);
		break;
	case W_GZIP:
		write_gzip(path, buf, n);
		break;
	case W_ZLIB: {
		uLongf zn = compressBound(n);
		uint8_t *z = malloc(zn);
		ck_assert_int_eq(compress2(z, &zn, buf, n, 6), Z_OK);
		write_file(path, z, zn);
		free(z);
		break;
	}
	case W_GZIP2: {
		/* two gzip files, concatenated byte for byte */
		char a[600], b[600];
		size_t na, nb;
		uint8_t *ba, *bb, *cat;

		snprintf(a, sizeof(a), "%s.part1", path);
		snprintf(b, sizeof(b), "%s.part2", path);
		write_gzip(a, buf, n / 2);
		write_gzip(b, buf + n / 2, n - n / 2);
		ba = read_file(a, &na);
		bb = read_file(b, &nb);
		cat = malloc(na + nb);
		memcpy(cat, ba, na);
		memcpy(cat + na, bb, nb);
		write_file(path, cat, na + nb);
		free(ba);
		free(bb);
		free(cat);
		break;
	}
	}
}

struct collect {
	const struct recs *want;
	uint64_t seen;
	int mismatches;
};

static int collect_fn(void *ctx, uint64_t index, uint64_t offset, const uint8_t *data, uint32_t len)
{
	struct collect *c = ctx;

	(void)offset;
	if (index != c->seen || index >= c->want->n || len != c->want->len[index] ||
	    memcmp(data, c->want->data[index], len) != 0)
		c->mismatches++;
	c->seen++;
	return 0;
}

/* ---- CRC32C ------------------------------------------------------------ */

/* bit-at-a-time reference */
static uint32_t crc_ref(uint32_t crc, const uint8_t *p, size_t n)
{
	uint32_t c = ~crc;
	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
	}
	return ~c;
}

START_TEST(crc32c_matches_the_standard_check_value)
{
	ck_assert_uint_eq(bfs_crc32c(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(bfs_crc32c_sw(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(bfs_crc32c(0, "", 0), 0);
	/* continuing from a previous CRC equals one pass */
	ck_assert_uint_eq(bfs_crc32c(bfs_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
	ck_assert_uint_eq(bfs_crc32c_sw(bfs_crc32c_sw(0, "12345", 5), "6789", 4), 0xE3069283u);
}
END_TEST

START_TEST(crc32c_sw_matches_reference_and_hw_for_every_length_and_alignment)
{
	enum { MAXLEN = 1024 };
	uint8_t *buf = malloc(MAXLEN + 16);

	rng_seed(42);
	for (size_t i = 0; i < MAXLEN + 16; i++)
		buf[i] = (uint8_t)rng();
	for (size_t len = 0; len <= MAXLEN; len++) {
		for (size_t a = 0; a < 8; a++) {
			uint32_t seed = (uint32_t)(len * 2654435761u);
			uint32_t ref = crc_ref(seed, buf + a, len);
			ck_assert_uint_eq(bfs_crc32c_sw(seed, buf + a, len), ref);
			/* the hardware path where there is one */
			ck_assert_uint_eq(bfs_crc32c(seed, buf + a, len), ref);
		}
	}
	free(buf);
}
END_TEST

START_TEST(crc32c_long_buffers_agree_across_interleave_boundaries)
{
	static const size_t lens[] = { 767,
				       768,
				       769,
				       24575,
				       24576,
				       24577,
				       24576 + 768 + 13,
				       100000,
				       3 * 8192 * 5 + 3 * 256 * 2 + 7 };
	size_t max = 130000;
	uint8_t *buf = malloc(max);

	rng_seed(7);
	for (size_t i = 0; i < max; i++)
		buf[i] = (uint8_t)rng();
	for (size_t i = 0; i < BFS_ARRAY_SIZE(lens); i++) {
		for (size_t a = 0; a < 3; a++) {
			uint32_t ref = crc_ref(0, buf + a, lens[i]);
			ck_assert_uint_eq(bfs_crc32c_sw(0, buf + a, lens[i]), ref);
			ck_assert_uint_eq(bfs_crc32c(0, buf + a, lens[i]), ref);
		}
	}
	free(buf);
}
END_TEST

START_TEST(crc32c_mask_roundtrips_and_matches_known_values)
{
	static const uint32_t vals[] = { 0,	     1,		 0x7fffffff, 0x80000000,
					 0xffffffff, 0xE3069283, 0xdeadbeef };
	for (size_t i = 0; i < BFS_ARRAY_SIZE(vals); i++)
		ck_assert_uint_eq(bfs_crc32c_unmask(bfs_crc32c_mask(vals[i])), vals[i]);
	ck_assert_uint_eq(bfs_crc32c_mask(0), 0xa282ead8u);
	ck_assert_uint_eq(bfs_crc32c_mask(0xE3069283u), 0xc78ab0e5u);
}
END_TEST

/* ---- names ------------------------------------------------------------- */

START_TEST(compression_names_parse_and_print)
{
	static const struct {
		const char *s;
		int err;
		enum bfs_compression c;
	} cases[] = {
		{ "auto", 0, BFS_COMP_AUTO },	{ "none", 0, BFS_COMP_NONE },
		{ "gzip", 0, BFS_COMP_GZIP },	{ "GZIP", 0, BFS_COMP_GZIP },
		{ "zlib", 0, BFS_COMP_ZLIB },	{ "lz4", -EINVAL, BFS_COMP_AUTO },
		{ "", -EINVAL, BFS_COMP_AUTO },
	};
	for (size_t i = 0; i < BFS_ARRAY_SIZE(cases); i++) {
		enum bfs_compression c = BFS_COMP_AUTO;
		ck_assert_int_eq(bfs_compression_parse(&c, cases[i].s), cases[i].err);
		if (!cases[i].err) {
			ck_assert_int_eq(c, cases[i].c);
			ck_assert_str_eq(bfs_compression_name(c), (i == 3) ? "gzip" : cases[i].s);
		}
	}
}
END_TEST

/* ---- framing ----------------------------------------------------------- */

static const struct {
	enum wkind kind;
	const char *name; /* deliberately misleading file names */
	enum bfs_compression want;
} framing_cases[] = {
	{ W_PLAIN, "plain.gz", BFS_COMP_NONE },
	{ W_GZIP, "gzip.tfrecord", BFS_COMP_GZIP },
	{ W_ZLIB, "zlib.gz", BFS_COMP_ZLIB },
	{ W_GZIP2, "gzip2.zz", BFS_COMP_GZIP },
};

/* Scan with a checking callback, then read every record back. */
static void check_roundtrip(const char *path, enum bfs_compression want_comp, const struct recs *r)
{
	struct bfs_shard *s = NULL;
	struct collect c = { r, 0, 0 };
	uint8_t *buf = malloc(1 << 22);

	ck_assert_msg(bfs_shard_open(&s, path, BFS_COMP_AUTO) == 0, "%s", bfs_err_msg());
	ck_assert_int_eq(bfs_shard_compression(s), want_comp);
	ck_assert_msg(bfs_shard_scan(s, true, collect_fn, &c) == 0, "%s", bfs_err_msg());
	ck_assert_int_eq(c.mismatches, 0);
	ck_assert_uint_eq(c.seen, r->n);
	ck_assert_uint_eq(bfs_shard_nrecords(s), r->n);
	for (uint64_t i = 0; i < r->n; i++) {
		ck_assert_msg(bfs_shard_read(s, i, buf, 1 << 22, true) == 0, "%s", bfs_err_msg());
		ck_assert_uint_eq(bfs_shard_record_len(s, i), r->len[i]);
		ck_assert(memcmp(buf, r->data[i], r->len[i]) == 0);
	}
	bfs_shard_close(s);
	free(buf);
}

START_TEST(framing_roundtrips_and_compression_is_detected_from_bytes)
{
	struct recs r;
	uint8_t *stream;
	size_t n;
	const char *path = tmp_path(framing_cases[_i].name);

	recs_gen(&r, 300, 700, 1000 + (uint64_t)_i, 0);
	r.len[0] = 0; /* an empty record is valid */
	r.len[17] = 0;
	stream = recs_frame(&r, &n);
	write_shard(path, framing_cases[_i].kind, stream, n);
	check_roundtrip(path, framing_cases[_i].want, &r);
	free(stream);
	recs_free(&r);
}
END_TEST

START_TEST(records_larger_than_the_scan_buffer_roundtrip)
{
	struct recs r;
	uint8_t *stream;
	size_t n;
	const char *path = tmp_path(framing_cases[_i].name);

	recs_gen(&r, 4, 10, 77, 1);
	free(r.data[1]);
	r.len[1] = 3u << 20; /* 3 MiB spans several 1 MiB chunks */
	r.data[1] = malloc(r.len[1]);
	for (uint32_t k = 0; k < r.len[1]; k++)
		r.data[1][k] = (uint8_t)(k * 31 + (k >> 9));
	stream = recs_frame(&r, &n);
	write_shard(path, framing_cases[_i].kind, stream, n);
	check_roundtrip(path, framing_cases[_i].want, &r);
	free(stream);
	recs_free(&r);
}
END_TEST

START_TEST(empty_file_is_a_plain_shard_with_no_records)
{
	struct bfs_shard *s = NULL;
	const char *path = tmp_path("empty");

	write_file(path, "", 0);
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_AUTO), 0);
	ck_assert_int_eq(bfs_shard_compression(s), BFS_COMP_NONE);
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), 0);
	ck_assert_uint_eq(bfs_shard_nrecords(s), 0);
	ck_assert_uint_eq(bfs_shard_file_size(s), 0);
	ck_assert_int_eq(bfs_shard_read(s, 0, NULL, 0, true), -ENOENT);
	bfs_shard_close(s);
}
END_TEST

START_TEST(open_reports_missing_files_and_directories)
{
	struct bfs_shard *s = NULL;

	ck_assert_int_eq(bfs_shard_open(&s, tmp_path("does-not-exist"), BFS_COMP_AUTO), -ENOENT);
	ck_assert_int_eq(bfs_shard_open(&s, tmpdir, BFS_COMP_AUTO), -EINVAL);
	ck_assert_ptr_null(s);
	bfs_shard_close(NULL);
}
END_TEST

/* ---- error paths ------------------------------------------------------- */

/* Mutations applied to a valid 3-record plain stream (records of 40, 50 and 60
 * bytes, so record 1 starts at offset 56 and record 2 at 122). */
enum mut {
	M_NONE, /* valid */
	M_TRUNC_LEN, /* only 5 bytes of record 2 */
	M_TRUNC_LEN_CRC, /* 10 bytes of record 2 */
	M_TRUNC_DATA, /* record 2's header + 20 of 60 bytes */
	M_TRUNC_DATA_CRC, /* record 2 without its last 2 bytes */
	M_BAD_LEN_CRC, /* record 1's length CRC flipped */
	M_BAD_DATA_CRC, /* a data byte of record 1 flipped */
	M_HUGE_4G, /* record 1 declares 2^32 bytes, valid length CRC */
	M_HUGE_2_63, /* record 1 declares 2^63 bytes, valid length CRC */
	M_DECLARED_PAST_END, /* record 2 declares 1000 bytes, valid length CRC */
};

static const struct {
	enum mut mut;
	int err;
	uint64_t indexed; /* records indexed before the error */
	const char *msg;
	bool cut; /* the file ends inside the record (bfs_shard_cut) */
} error_cases[] = {
	{ M_TRUNC_LEN, -EBADMSG, 2, "record 2 at offset 122: truncated length (5 of 8 bytes)",
	  true },
	{ M_TRUNC_LEN_CRC, -EBADMSG, 2, "record 2 at offset 122: truncated length CRC", true },
	{ M_TRUNC_DATA, -EBADMSG, 2,
	  "record 2 at offset 122: truncated data (declared 60 bytes, 20 left)", true },
	{ M_TRUNC_DATA_CRC, -EBADMSG, 2, "record 2 at offset 122: truncated data CRC (2 of 4",
	  true },
	{ M_BAD_LEN_CRC, -EBADMSG, 1, "record 1 at offset 56: length CRC mismatch (stored 0x",
	  false },
	{ M_BAD_DATA_CRC, -EBADMSG, 1, "record 1 at offset 56: data CRC mismatch (stored 0x",
	  false },
	{ M_HUGE_4G, -EFBIG, 1,
	  "record 1 at offset 56: declared length 4294967296 exceeds limit 1073741824", false },
	{ M_HUGE_2_63, -EFBIG, 1,
	  "record 1 at offset 56: declared length 9223372036854775808 exceeds limit 1073741824",
	  false },
	/* a length with a good CRC that runs past the end: a cut, as far as
	 * anyone can tell */
	{ M_DECLARED_PAST_END, -EBADMSG, 2,
	  "record 2 at offset 122: truncated data (declared 1000 bytes, 64 left)", true },
};

static size_t build_mutated(uint8_t *buf, enum mut m)
{
	uint8_t data[60];
	size_t pos = 0, r1, r2;

	memset(data, 'x', sizeof(data));
	pos += frame_one(buf + pos, data, 40);
	r1 = pos;
	pos += frame_one(buf + pos, data, 50);
	r2 = pos;
	pos += frame_one(buf + pos, data, 60);
	switch (m) {
	case M_NONE:
		return pos;
	case M_TRUNC_LEN:
		return r2 + 5;
	case M_TRUNC_LEN_CRC:
		return r2 + 10;
	case M_TRUNC_DATA:
		return r2 + 12 + 20;
	case M_TRUNC_DATA_CRC:
		return pos - 2;
	case M_BAD_LEN_CRC:
		buf[r1 + 9] ^= 0x40;
		return pos;
	case M_BAD_DATA_CRC:
		buf[r1 + 12 + 7] ^= 1;
		return pos;
	case M_HUGE_4G:
	case M_HUGE_2_63:
	case M_DECLARED_PAST_END: {
		size_t at = m == M_DECLARED_PAST_END ? r2 : r1;
		put_le64(buf + at, m == M_HUGE_4G     ? (uint64_t)1 << 32
				   : m == M_HUGE_2_63 ? (uint64_t)1 << 63
						      : 1000);
		put_le32(buf + at + 8, bfs_crc32c_mask(bfs_crc32c(0, buf + at, 8)));
		return pos;
	}
	}
	return pos;
}

START_TEST(scan_reports_each_framing_error_with_record_and_offset)
{
	uint8_t buf[512];
	size_t n = build_mutated(buf, error_cases[_i].mut);
	const char *path = tmp_path("mutated");
	struct bfs_shard *s = NULL;
	int err;

	write_file(path, buf, n);
	ck_assert_msg(bfs_shard_open(&s, path, BFS_COMP_AUTO) == 0, "%s", bfs_err_msg());
	ck_assert_int_eq(bfs_shard_compression(s), BFS_COMP_NONE);
	bfs_err_format("%s", ""); /* no message yet */
	err = bfs_shard_scan(s, true, NULL, NULL);
	ck_assert_int_eq(err, error_cases[_i].err);
	ck_assert_msg(strstr(bfs_err_msg(), error_cases[_i].msg) != NULL, "got '%s', want '%s'",
		      bfs_err_msg(), error_cases[_i].msg);
	ck_assert_uint_eq(bfs_shard_nrecords(s), error_cases[_i].indexed);
	ck_assert_int_eq(bfs_shard_cut(s), error_cases[_i].cut);
	bfs_shard_close(s);
}
END_TEST

START_TEST(scan_errors_are_the_same_inside_gzip)
{
	uint8_t buf[512];
	size_t n = build_mutated(buf, error_cases[_i].mut);
	const char *path = tmp_path("mutated.gz");
	struct bfs_shard *s = NULL;

	write_shard(path, W_GZIP, buf, n);
	ck_assert_msg(bfs_shard_open(&s, path, BFS_COMP_AUTO) == 0, "%s", bfs_err_msg());
	ck_assert_int_eq(bfs_shard_compression(s), BFS_COMP_GZIP);
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), error_cases[_i].err);
	if (error_cases[_i].mut != M_DECLARED_PAST_END) /* "left" counts differ */
		ck_assert_msg(strstr(bfs_err_msg(), error_cases[_i].msg) != NULL,
			      "got '%s', want '%s'", bfs_err_msg(), error_cases[_i].msg);
	ck_assert_uint_eq(bfs_shard_nrecords(s), error_cases[_i].indexed);
	ck_assert_int_eq(bfs_shard_cut(s), error_cases[_i].cut);
	bfs_shard_close(s);
}
END_TEST

struct bad_seen {
	unsigned n;
	uint64_t index, offset;
	char msg[256];
};

static void note_bad(void *ctx, uint64_t index, uint64_t offset, const char *msg)
{
	struct bad_seen *b = ctx;

	b->n++;
	b->index = index;
	b->offset = offset;
	snprintf(b->msg, sizeof(b->msg), "%s", msg);
}

/* With a bad-record function, a length CRC that fails over a length the
 * data's CRC confirms is a corrupt record like a bad data CRC: indexed,
 * reported, and read as corrupt (on_corrupt decides); a length that the
 * data does not confirm still stops the scan (the framing is lost). */
START_TEST(length_crc_hit_over_a_right_length_is_indexed_as_a_bad_record)
{
	static const enum wkind kinds[] = { W_PLAIN, W_GZIP };
	uint8_t buf[512], rec[64];
	size_t n = build_mutated(buf, M_BAD_LEN_CRC);
	const char *path = tmp_path(_i ? "badlen.gz" : "badlen");
	struct bfs_shard *s = NULL;
	struct bad_seen seen = { 0 };

	write_shard(path, kinds[_i], buf, n);
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_AUTO), 0);
	bfs_shard_set_bad_fn(s, note_bad, &seen);
	ck_assert_msg(bfs_shard_scan(s, true, NULL, NULL) == 0, "%s", bfs_err_msg());
	ck_assert_uint_eq(bfs_shard_nrecords(s), 3);
	ck_assert_uint_eq(seen.n, 1);
	ck_assert_uint_eq(seen.index, 1);
	ck_assert_uint_eq(seen.offset, 56);
	ck_assert_ptr_nonnull(strstr(seen.msg, "record 1 at offset 56: length CRC mismatch"));
	ck_assert_int_eq(bfs_shard_read(s, 1, rec, sizeof(rec), true), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "record 1 at offset 56: length CRC mismatch"));
	ck_assert_int_eq(bfs_shard_read(s, 1, rec, sizeof(rec), false), 0);
	ck_assert_int_eq(bfs_shard_read(s, 2, rec, sizeof(rec), true), 0);
	bfs_shard_close(s);

	/* the length itself hit: 50 read as 58, whose CRC fails and whose data
	 * CRC does not hold either */
	buf[56] ^= 8;
	write_shard(path, kinds[_i], buf, n);
	memset(&seen, 0, sizeof(seen));
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_AUTO), 0);
	bfs_shard_set_bad_fn(s, note_bad, &seen);
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), -EBADMSG);
	ck_assert_msg(strstr(bfs_err_msg(), "record 1 at offset 56: length CRC mismatch") != NULL,
		      "%s", bfs_err_msg());
	ck_assert_uint_eq(seen.n, 0);
	ck_assert_int_eq(bfs_shard_cut(s), false);
	bfs_shard_close(s);
}
END_TEST

START_TEST(verify_off_skips_crc_checks_but_not_framing)
{
	uint8_t buf[512];
	size_t n = build_mutated(buf, M_BAD_DATA_CRC);
	const char *path = tmp_path("badcrc");
	struct bfs_shard *s = NULL;
	uint8_t rec[64];

	write_file(path, buf, n);
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_NONE), 0);
	ck_assert_int_eq(bfs_shard_scan(s, false, NULL, NULL), 0);
	ck_assert_uint_eq(bfs_shard_nrecords(s), 3);
	ck_assert_int_eq(bfs_shard_read(s, 1, rec, sizeof(rec), false), 0);
	ck_assert_int_eq(bfs_shard_read(s, 1, rec, sizeof(rec), true), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "record 1 at offset 56: data CRC mismatch"));
	bfs_shard_close(s);
}
END_TEST

START_TEST(first_record_corrupt_is_not_a_tfrecord_unless_forced)
{
	uint8_t buf[512];
	size_t n;
	const char *path = tmp_path("first-bad");
	struct bfs_shard *s = NULL;

	memset(buf, 'y', 60);
	n = frame_one(buf, buf + 100, 0);
	buf[8] ^= 1;
	write_file(path, buf, n);
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_AUTO), -EBADMSG);
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_NONE), 0);
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "record 0 at offset 0: length CRC mismatch"));
	bfs_shard_close(s);
}
END_TEST

START_TEST(text_file_is_not_a_tfrecord)
{
	static const char *const texts[] = { "hello, world: this is not a TFRecord\n", "x",
					     "\x1f" };
	struct bfs_shard *s = NULL;
	const char *path = tmp_path("text");

	for (size_t i = 0; i < BFS_ARRAY_SIZE(texts); i++) {
		write_file(path, texts[i], strlen(texts[i]));
		ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_AUTO), -EBADMSG);
		ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "not a TFRecord file"));
		ck_assert_ptr_null(s);
	}
}
END_TEST

START_TEST(corrupt_deflate_stream_is_reported_with_compressed_offset)
{
	/* gzip header, then a final block of the reserved type 3 */
	static const uint8_t bad[] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0x07, 0, 0, 0 };
	struct bfs_shard *s = NULL;
	const char *path = tmp_path("bad-deflate");

	write_file(path, bad, sizeof(bad));
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_AUTO), 0);
	ck_assert_int_eq(bfs_shard_compression(s), BFS_COMP_GZIP);
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), -EBADMSG);
	ck_assert_msg(strstr(bfs_err_msg(),
			     "record 0 at offset 0: gzip stream: invalid deflate data at "
			     "compressed offset") != NULL,
		      "%s", bfs_err_msg());
	bfs_shard_close(s);
}
END_TEST

START_TEST(damaged_gzip_payload_fails_the_scan)
{
	struct recs r;
	uint8_t *stream, *gz;
	size_t n, gn;
	const char *path = tmp_path("damaged.gz");
	struct bfs_shard *s = NULL;

	recs_gen(&r, 200, 300, 5, 0);
	stream = recs_frame(&r, &n);
	write_shard(path, W_GZIP, stream, n);
	gz = read_file(path, &gn);
	for (size_t k = gn / 2; k < gn / 2 + 16; k++)
		gz[k] ^= 0x5a;
	write_file(path, gz, gn);
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_AUTO), 0);
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "record "));
	ck_assert_uint_lt(bfs_shard_nrecords(s), r.n);
	bfs_shard_close(s);
	free(gz);
	free(stream);
	recs_free(&r);
}
END_TEST

static const struct {
	enum wkind kind;
	size_t cut;
	const char *msg;
} trunc_cases[] = {
	{ W_GZIP, 3, "gzip stream: unexpected end of compressed data" },
	{ W_GZIP, 8, "gzip stream: unexpected end of compressed data" },
	{ W_ZLIB, 2, "zlib stream: unexpected end of compressed data" },
	{ W_GZIP2, 5, "gzip stream: unexpected end of compressed data" },
};

START_TEST(truncated_compressed_trailer_is_an_error_after_all_records)
{
	struct recs r;
	uint8_t *stream, *z;
	size_t n, zn;
	const char *path = tmp_path("trunc");
	struct bfs_shard *s = NULL;

	recs_gen(&r, 50, 100, 9, 0);
	stream = recs_frame(&r, &n);
	write_shard(path, trunc_cases[_i].kind, stream, n);
	z = read_file(path, &zn);
	write_file(path, z, zn - trunc_cases[_i].cut);
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_AUTO), 0);
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), -EBADMSG);
	ck_assert_msg(strstr(bfs_err_msg(), trunc_cases[_i].msg) != NULL, "%s", bfs_err_msg());
	ck_assert_uint_eq(bfs_shard_nrecords(s), r.n);
	ck_assert(bfs_shard_cut(s)); /* every record is whole: a cut after the last */
	bfs_shard_close(s);
	free(z);
	free(stream);
	recs_free(&r);
}
END_TEST

START_TEST(trailing_garbage_after_gzip_member_is_an_error)
{
	struct recs r;
	uint8_t *stream, *z;
	size_t n, zn;
	const char *path = tmp_path("garbage.gz");
	struct bfs_shard *s = NULL;

	recs_gen(&r, 20, 100, 10, 0);
	stream = recs_frame(&r, &n);
	write_shard(path, W_GZIP, stream, n);
	z = read_file(path, &zn);
	z = realloc(z, zn + 4);
	memcpy(z + zn, "junk", 4);
	write_file(path, z, zn + 4);
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_AUTO), 0);
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), -EBADMSG);
	ck_assert_uint_eq(bfs_shard_nrecords(s), r.n);
	bfs_shard_close(s);
	free(z);
	free(stream);
	recs_free(&r);
}
END_TEST

static int stop_at_3(void *ctx, uint64_t index, uint64_t offset, const uint8_t *data, uint32_t len)
{
	(void)ctx;
	(void)offset;
	(void)data;
	(void)len;
	return index == 3 ? -ECANCELED : 0;
}

START_TEST(scan_stops_when_the_callback_fails)
{
	struct recs r;
	uint8_t *stream;
	size_t n;
	const char *path = tmp_path("stop");
	struct bfs_shard *s = NULL;

	recs_gen(&r, 10, 10, 11, 0);
	stream = recs_frame(&r, &n);
	write_shard(path, W_PLAIN, stream, n);
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_AUTO), 0);
	ck_assert_int_eq(bfs_shard_scan(s, true, stop_at_3, NULL), -ECANCELED);
	ck_assert_uint_eq(bfs_shard_nrecords(s), 4);
	/* a second scan replaces the index */
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), 0);
	ck_assert_uint_eq(bfs_shard_nrecords(s), 10);
	bfs_shard_close(s);
	free(stream);
	recs_free(&r);
}
END_TEST

/* ---- read errors ------------------------------------------------------- */

START_TEST(read_checks_index_buffer_size_and_changed_files)
{
	uint8_t buf[512], rec[64];
	size_t n = build_mutated(buf, M_NONE);
	const char *path = tmp_path("changing");
	struct bfs_shard *s = NULL;

	write_file(path, buf, n);
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_AUTO), 0);
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), 0);
	ck_assert_uint_eq(bfs_shard_nrecords(s), 3);
	ck_assert_int_eq(bfs_shard_read(s, 3, rec, sizeof(rec), true), -ENOENT);
	ck_assert_int_eq(bfs_shard_read(s, 2, rec, 59, true), -EFBIG);
	ck_assert_int_eq(bfs_shard_read(s, 2, rec, 60, true), 0);

	/* the file changes under the index: data, then a length */
	buf[56 + 12 + 3] ^= 1;
	write_file(path, buf, n);
	ck_assert_int_eq(bfs_shard_read(s, 1, rec, sizeof(rec), true), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "record 1 at offset 56: data CRC mismatch"));
	put_le64(buf + 56, 49);
	put_le32(buf + 56 + 8, bfs_crc32c_mask(bfs_crc32c(0, buf + 56, 8)));
	write_file(path, buf, n);
	ck_assert_int_eq(bfs_shard_read(s, 1, rec, sizeof(rec), false), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "differs from the index"));
	/* and shrinks */
	write_file(path, buf, 100);
	ck_assert_int_eq(bfs_shard_read(s, 2, rec, sizeof(rec), true), -EIO);
	bfs_shard_close(s);
}
END_TEST

/* A plain shard is read through a mapping: truncating it under the mapping
 * must give -EIO for the records now past its end (a SIGBUS past the last
 * page, zeros inside it), never a crash or the zeros as data; the records
 * that are still there read fine, singly and batched. */
START_TEST(mapped_shard_truncated_under_reads_is_eio)
{
	struct recs r;
	uint8_t *stream, buf[1024];
	size_t n;
	const char *path = tmp_path("mapped-trunc");
	struct bfs_shard *s = NULL;
	uint64_t idx[64];
	uint8_t *dst[64];
	int errs[64];
	char *msgs[64];
	uint64_t cut = 100;

	recs_gen(&r, 64, 400, 77, 1); /* about 13 KiB: several pages */
	stream = recs_frame(&r, &n);
	write_file(path, stream, n);
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_AUTO), 0);
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), 0);
	for (size_t i = 0; i < r.n; i++) {
		ck_assert_int_eq(bfs_shard_read(s, i, buf, sizeof(buf), true), 0);
		ck_assert(memcmp(buf, r.data[i], r.len[i]) == 0);
	}
	/* keep the first record whole, cut inside the first page */
	cut = 16 + r.len[0];
	ck_assert_int_eq(truncate(path, (off_t)cut), 0);
	ck_assert_int_eq(bfs_shard_read(s, 0, buf, sizeof(buf), true), 0);
	for (size_t i = 1; i < r.n; i++) {
		ck_assert_int_eq(bfs_shard_read(s, i, buf, sizeof(buf), false), -EIO);
		ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "truncated"));
	}
	for (size_t i = 0; i < r.n; i++) {
		idx[i] = r.n - 1 - i; /* any order for a plain shard */
		dst[i] = malloc(r.len[r.n - 1 - i] + 1);
	}
	bfs_shard_read_many(s, idx, r.n, dst, false, errs, msgs);
	for (size_t i = 0; i < r.n; i++) {
		if (idx[i] == 0) {
			ck_assert_int_eq(errs[i], 0);
			ck_assert(memcmp(dst[i], r.data[0], r.len[0]) == 0);
		} else {
			ck_assert_int_eq(errs[i], -EIO);
			ck_assert_ptr_nonnull(msgs[i]);
			ck_assert_ptr_nonnull(strstr(msgs[i], "truncated"));
		}
		free(msgs[i]);
		free(dst[i]);
	}
	bfs_shard_close(s);
	free(stream);
	recs_free(&r);
}
END_TEST

/* Read system calls this process made so far (/proc/self/io syscr). */
static uint64_t read_calls(void)
{
	FILE *f = fopen("/proc/self/io", "re");
	char line[128];
	unsigned long long v = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "syscr: %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}

static void flip_byte(const char *path, uint64_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, (off_t)off), 1);
	b ^= 0x40;
	ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)off), 1);
	close(fd);
}

/* Records of a shard that is not mapped (large records) are read in runs:
 * nearby records of one call cost one read system call, each record's bytes
 * land in its own buffer, and a record met twice, one out of range, one
 * corrupt or one past a truncated end are each reported alone. */
START_TEST(unmapped_nearby_records_are_read_in_one_call)
{
	enum { N = 48, LO = 10, HI = 41 };
	struct recs r;
	uint8_t *stream;
	size_t n, m = 0;
	const char *path = tmp_path("runs");
	struct bfs_shard *s = NULL;
	uint64_t idx[64], off[N + 1], before, cost;
	uint8_t *dst[64];
	int errs[64];
	char *msgs[64];

	recs_gen(&r, N, 1, 99, 1);
	for (size_t i = 0; i < N; i++) { /* 70 to 100 KB: too large to map */
		free(r.data[i]);
		r.len[i] = 70000 + (uint32_t)(i * 613 % 30000);
		r.data[i] = malloc(r.len[i]);
		for (uint32_t k = 0; k < r.len[i]; k++)
			r.data[i][k] = (uint8_t)(i * 31 + k * 7);
	}
	off[0] = 0;
	for (size_t i = 0; i < N; i++)
		off[i + 1] = off[i] + 16 + r.len[i];
	stream = recs_frame(&r, &n);
	write_file(path, stream, n);
	ck_assert_int_eq(bfs_shard_open(&s, path, BFS_COMP_AUTO), 0);
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), 0);

	/* LO..HI in a shuffled order, one twice, two far ones, one past the end */
	for (uint64_t i = LO; i <= HI; i++)
		idx[m++] = LO + (i * 7) % (HI - LO + 1);
	idx[m++] = 20;
	idx[m++] = 0;
	idx[m++] = N - 1;
	idx[m++] = 1000;
	for (size_t k = 0; k < m; k++)
		dst[k] = malloc(idx[k] < N ? r.len[idx[k]] : 1);
	before = read_calls();
	cost = read_calls() - before; /* what reading the counter costs */
	before = read_calls();
	bfs_shard_read_many(s, idx, m, dst, true, errs, msgs);
	/* runs: 0 | LO..20 | 20..HI | N-1 (the second 20 starts a run) */
	ck_assert_uint_eq(read_calls() - before - cost, 4);
	for (size_t k = 0; k < m; k++) {
		if (idx[k] >= N) {
			ck_assert_int_eq(errs[k], -ENOENT);
		} else {
			ck_assert_int_eq(errs[k], 0);
			ck_assert_mem_eq(dst[k], r.data[idx[k]], r.len[idx[k]]);
		}
		free(msgs[k]);
	}

	/* a corrupt record fails alone, with its CRC named */
	flip_byte(path, off[25] + 12 + 100);
	bfs_shard_read_many(s, idx, m - 1, dst, true, errs, msgs);
	for (size_t k = 0; k < m - 1; k++) {
		if (idx[k] == 25) {
			ck_assert_int_eq(errs[k], -EBADMSG);
			ck_assert_ptr_nonnull(strstr(msgs[k], "data CRC mismatch"));
		} else {
			ck_assert_int_eq(errs[k], 0);
			ck_assert_mem_eq(dst[k], r.data[idx[k]], r.len[idx[k]]);
		}
		free(msgs[k]);
	}
	flip_byte(path, off[25] + 12 + 100);

	/* cut inside record 30: the records before it still read */
	ck_assert_int_eq(truncate(path, (off_t)(off[30] + 20)), 0);
	bfs_shard_read_many(s, idx, m - 1, dst, true, errs, msgs);
	for (size_t k = 0; k < m - 1; k++) {
		if (idx[k] >= 30) {
			ck_assert_int_eq(errs[k], -EIO);
			ck_assert_ptr_nonnull(strstr(msgs[k], "truncated"));
		} else {
			ck_assert_int_eq(errs[k], 0);
			ck_assert_mem_eq(dst[k], r.data[idx[k]], r.len[idx[k]]);
		}
		free(msgs[k]);
	}
	for (size_t k = 0; k < m; k++)
		free(dst[k]);
	bfs_shard_close(s);
	free(stream);
	recs_free(&r);
}
END_TEST

/* ---- random and concurrent access -------------------------------------- */

struct big {
	struct recs r;
	char path[512];
};

/* A multi-MiB gzip shard: enough output for many seek points. */
static void big_make(struct big *b, const char *name, size_t nrec, enum wkind kind)
{
	uint8_t *stream;
	size_t n;

	recs_gen(&b->r, nrec, 2048, 1234, 1);
	/* Mostly long repeats (cheap to inflate past on every read, so the test
	 * stays fast), with some random and some text-like records so that
	 * literal-heavy blocks and seek points mid-byte occur too. */
	for (size_t i = 0; i < nrec; i++) {
		uint8_t *d = b->r.data[i];
		if (i % 97 == 0)
			continue; /* random bytes */
		for (uint32_t k = 0; k < b->r.len[i]; k++)
			d[k] = i % 13 == 0
				       ? (uint8_t)("abcdefgh ijk\n"[rng() % 13])
				       : (uint8_t)("0123456789abcdef"[(k + i) % 16] ^ (i & 0x3f));
	}
	stream = recs_frame(&b->r, &n);
	snprintf(b->path, sizeof(b->path), "%s", tmp_path(name));
	write_shard(b->path, kind, stream, n);
	free(stream);
}

START_TEST(random_access_reads_every_record_of_a_large_gzip_shard)
{
	struct big b;
	struct bfs_shard *s = NULL;
	struct collect c;
	uint64_t *order;
	uint8_t *buf = malloc(4096);
	size_t nrec = 20000;
	bool saw_bits = false;

	big_make(&b, "big.gz", nrec, W_GZIP);
	c = (struct collect){ &b.r, 0, 0 };
	ck_assert_int_eq(bfs_shard_open(&s, b.path, BFS_COMP_AUTO), 0);
	ck_assert_msg(bfs_shard_scan(s, true, collect_fn, &c) == 0, "%s", bfs_err_msg());
	ck_assert_int_eq(c.mismatches, 0);
	ck_assert_uint_eq(bfs_shard_nrecords(s), nrec);
	ck_assert_uint_ge(s->npts, 10);
	for (size_t i = 0; i < s->npts; i++)
		saw_bits |= s->pts[i].bits != 0;
	ck_assert(saw_bits);

	order = malloc(nrec * sizeof(*order));
	for (size_t i = 0; i < nrec; i++)
		order[i] = i;
	rng_seed(99);
	for (size_t i = nrec - 1; i > 0; i--) {
		size_t j = rng() % (i + 1);
		uint64_t t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (size_t k = 0; k < nrec; k++) {
		uint64_t i = order[k];
		ck_assert_msg(bfs_shard_read(s, i, buf, 4096, true) == 0, "%s", bfs_err_msg());
		ck_assert(memcmp(buf, b.r.data[i], b.r.len[i]) == 0);
	}
	bfs_shard_close(s);
	free(order);
	free(buf);
	recs_free(&b.r);
}
END_TEST

struct thr {
	struct bfs_shard *s;
	const struct recs *r;
	uint64_t seed;
	int failures;
};

static void *reader_thread(void *arg)
{
	struct thr *t = arg;
	uint8_t *buf = malloc(4096);
	uint64_t n = t->r->n;
	uint64_t step = 7919; /* prime, coprime with n: no record twice per thread */

	/* each thread reads half the records, from its own start */
	for (uint64_t k = 0, i = t->seed % n; k < n / 2; k++, i = (i + step) % n) {
		if (bfs_shard_read(t->s, i, buf, 4096, true) != 0 ||
		    memcmp(buf, t->r->data[i], t->r->len[i]) != 0)
			t->failures++;
	}
	free(buf);
	return NULL;
}

static const enum wkind concurrent_kinds[] = { W_PLAIN, W_GZIP, W_GZIP2 };

START_TEST(concurrent_reads_from_four_threads_agree_with_the_scan)
{
	struct big b;
	struct bfs_shard *s = NULL;
	pthread_t th[4];
	struct thr t[4];
	size_t nrec = 4000;

	big_make(&b, "conc", nrec, concurrent_kinds[_i]);
	ck_assert_int_eq(bfs_shard_open(&s, b.path, BFS_COMP_AUTO), 0);
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), 0);
	ck_assert_uint_eq(bfs_shard_nrecords(s), nrec);
	for (int k = 0; k < 4; k++) {
		t[k] = (struct thr){ s, &b.r, (uint64_t)k * (nrec / 4), 0 };
		ck_assert_int_eq(pthread_create(&th[k], NULL, reader_thread, &t[k]), 0);
	}
	for (int k = 0; k < 4; k++) {
		pthread_join(th[k], NULL);
		ck_assert_int_eq(t[k].failures, 0);
	}
	bfs_shard_close(s);
	recs_free(&b.r);
}
END_TEST

START_TEST(set_index_roundtrips_into_a_fresh_shard)
{
	struct big b;
	struct bfs_shard *s = NULL, *s2 = NULL;
	struct bfs_index *ix = NULL;
	uint8_t *buf = malloc(4096);
	size_t nrec = 3000;

	big_make(&b, "idx.gz", nrec, W_GZIP);
	ck_assert_int_eq(bfs_shard_open(&s, b.path, BFS_COMP_AUTO), 0);
	ck_assert_int_eq(bfs_shard_scan(s, true, NULL, NULL), 0);
	ck_assert_uint_ge(s->npts, 1);
	ck_assert_int_eq(bfs_shard_open(&s2, b.path, BFS_COMP_GZIP), 0);
	/* a copy of s's index, record by record */
	ck_assert_int_eq(bfs_index_new(&ix), 0);
	for (uint64_t i = 0; i < nrec; i++)
		ck_assert_int_eq(bfs_index_push(ix, bfs_shard_record_offset(s, i),
						bfs_shard_record_len(s, i)),
				 0);
	for (size_t i = 0; i < s->npts; i++)
		memcpy(bfs_index_add_point(ix), &s->pts[i], sizeof(struct bfs_seek_point));
	ck_assert_int_eq(bfs_shard_set_index(s2, ix), 0);
	ck_assert_uint_eq(bfs_shard_nrecords(s2), nrec);
	ck_assert_uint_eq(s2->npts, s->npts);
	ck_assert_ptr_ne(bfs_shard_get_index(s2), bfs_shard_get_index(s));
	for (uint64_t i = 0; i <= nrec; i++)
		ck_assert_uint_eq(bfs_shard_record_offset(s2, i), bfs_shard_record_offset(s, i));
	ck_assert_uint_eq(bfs_shard_max_len(s2), bfs_shard_max_len(s));
	bfs_shard_close(s);
	for (uint64_t i = 0; i < nrec; i += 3) {
		ck_assert_msg(bfs_shard_read(s2, i, buf, 4096, true) == 0, "%s", bfs_err_msg());
		ck_assert(memcmp(buf, b.r.data[i], b.r.len[i]) == 0);
	}
	/* an overlapping record is refused by the index */
	ck_assert_int_eq(bfs_index_new(&ix), 0);
	ck_assert_int_eq(bfs_index_push(ix, 0, 100), 0);
	ck_assert_int_eq(bfs_index_push(ix, 50, 10), -EINVAL);
	bfs_index_free(ix);
	/* an empty index installs */
	ck_assert_int_eq(bfs_index_new(&ix), 0);
	ck_assert_int_eq(bfs_shard_set_index(s2, ix), 0);
	ck_assert_uint_eq(bfs_shard_nrecords(s2), 0);
	bfs_shard_close(s2);
	free(buf);
	recs_free(&b.r);
}
END_TEST

/* ---- driver ------------------------------------------------------------- */

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/* ---- descriptors -------------------------------------------------------- */

static size_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	size_t n = 0;

	ck_assert_ptr_nonnull(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

enum { NSH = 40, PER = 3, FDLIM = 4 };

static const char *fd_name(int i)
{
	static char name[16];

	snprintf(name, sizeof(name), "fd-%02d", i % 100);
	return name;
}

/* Forty shards (plain, gzip, zlib in turn) under a cache of four idle
 * descriptors: opening, scanning and reading every record in an order that
 * jumps between shards all keep at most four open, and every record reads
 * back as written; a shard renamed over while its descriptor was closed is
 * an error naming the change, never the new file's bytes. */
START_TEST(many_shards_share_a_bounded_descriptor_cache)
{
	static const enum wkind kinds[] = { W_PLAIN, W_GZIP, W_ZLIB };
	struct bfs_shard *sh[NSH];
	struct recs r[NSH];
	uint8_t buf[512];
	size_t base, n;

	bfs_fdcache_set_limit(FDLIM);
	base = open_fds();
	for (int i = 0; i < NSH; i++) {
		uint8_t *stream;

		recs_gen(&r[i], PER, 200, 900 + (uint64_t)i, i & 1);
		stream = recs_frame(&r[i], &n);
		write_shard(tmp_path(fd_name(i)), kinds[i % 3], stream, n);
		free(stream);
	}
	for (int i = 0; i < NSH; i++) {
		ck_assert_int_eq(bfs_shard_open(&sh[i], tmp_path(fd_name(i)), BFS_COMP_AUTO), 0);
		ck_assert_uint_le(open_fds(), base + FDLIM);
	}
	ck_assert_uint_le(open_fds(), base + FDLIM);
	for (int i = 0; i < NSH; i++) {
		struct collect c = { &r[i], 0, 0 };
		ck_assert_int_eq(bfs_shard_scan(sh[i], true, collect_fn, &c), 0);
		ck_assert_int_eq(c.mismatches, 0);
		ck_assert_uint_eq(c.seen, PER);
	}
	ck_assert_uint_le(open_fds(), base + FDLIM);
	/* record k of every shard, then k+1: each read reopens its shard */
	for (int rep = 0; rep < 2; rep++) {
		for (int k = 0; k < PER; k++) {
			for (int i = 0; i < NSH; i++) {
				ck_assert_int_eq(
					bfs_shard_read(sh[i], (uint64_t)k, buf, sizeof(buf), true),
					0);
				ck_assert_mem_eq(buf, r[i].data[k], r[i].len[k]);
			}
			ck_assert_uint_le(open_fds(), base + FDLIM);
		}
	}
	for (int i = 0; i < NSH; i++) {
		uint64_t idx[PER] = { 2, 0, 1 };
		uint8_t out[PER][512];
		uint8_t *dst[PER] = { out[0], out[1], out[2] };
		int errs[PER];
		char *msgs[PER];

		bfs_shard_read_many(sh[i], idx, PER, dst, true, errs, msgs);
		for (int k = 0; k < PER; k++) {
			ck_assert_int_eq(errs[k], 0);
			ck_assert_mem_eq(out[k], r[i].data[idx[k]], r[i].len[idx[k]]);
		}
	}
	ck_assert_uint_le(open_fds(), base + FDLIM);

	/* shard 1 (gzip) is not among the last four used: replace it */
	{
		uint8_t *stream = recs_frame(&r[2], &n);
		char tmp[80];

		snprintf(tmp, sizeof(tmp), "%s.new", fd_name(1));
		write_shard(tmp_path(tmp), W_GZIP, stream, n);
		free(stream);
		char from[600];

		snprintf(from, sizeof(from), "%s", tmp_path(tmp));
		ck_assert_int_eq(rename(from, tmp_path(fd_name(1))), 0);
		ck_assert_int_eq(bfs_shard_read(sh[1], 0, buf, sizeof(buf), true), -EIO);
		ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "replaced"));
	}
	for (int i = 0; i < NSH; i++) {
		bfs_shard_close(sh[i]);
		recs_free(&r[i]);
	}
	ck_assert_uint_eq(open_fds(), base);
}
END_TEST

/* ------------------------------------------------ shards that are not files */

/* An object held in memory, as a bucket's would be read: every read,
 * and the passes in order, counted. */
struct memobj {
	uint8_t *data;
	size_t n;
	unsigned reads, streams, closed;
	bool fail; /* reads fail from now on */
};

static ssize_t mem_pread(void *obj, void *buf, size_t n, uint64_t off)
{
	struct memobj *m = obj;

	m->reads++;
	if (m->fail)
		return bfs_err_set(-EIO, "s3://bucket/obj: bytes %llu-%llu: connection reset",
				   (unsigned long long)off, (unsigned long long)(off + n - 1));
	if (off >= m->n)
		return 0;
	if (n > m->n - off)
		n = m->n - (size_t)off;
	memcpy(buf, m->data + off, n);
	return (ssize_t)n;
}

static void mem_stream_begin(void *obj, uint64_t off)
{
	(void)off;
	((struct memobj *)obj)->streams++;
}

static void mem_close(void *obj)
{
	((struct memobj *)obj)->closed++;
}

static const struct bfs_shard_io mem_io = {
	.pread = mem_pread,
	.stream_begin = mem_stream_begin,
	.stream_end = NULL,
	.close = mem_close,
};

START_TEST(shards_read_through_io_equal_files)
{
	static const enum wkind kinds[] = { W_PLAIN, W_GZIP, W_ZLIB, W_GZIP2 };
	struct recs r;
	uint8_t *stream, *buf = malloc(1 << 16), *want = malloc(1 << 16);
	size_t n;

	recs_gen(&r, 400, 900, 77, 0);
	stream = recs_frame(&r, &n);
	for (size_t k = 0; k < BFS_ARRAY_SIZE(kinds); k++) {
		const char *path = tmp_path("io-shard");
		struct bfs_shard *file = NULL, *obj = NULL;
		struct memobj m = { 0 };
		uint64_t idx[50];
		uint8_t *dst[50], *dmem = malloc(50 << 10);
		int errs[50];
		char *msgs[50];

		write_shard(path, kinds[k], stream, n);
		m.data = read_file(path, &m.n);
		ck_assert_int_eq(bfs_shard_open(&file, path, BFS_COMP_AUTO), 0);
		ck_assert_int_eq(bfs_shard_scan(file, true, NULL, NULL), 0);
		ck_assert_int_eq(bfs_shard_open_io(&obj, "s3://bucket/obj", m.n, 42, &mem_io, &m),
				 0);
		ck_assert_str_eq(bfs_shard_path(obj), "s3://bucket/obj");
		ck_assert_int_eq(bfs_shard_mtime_ns(obj), 42);
		ck_assert(bfs_shard_is_remote(obj)); /* never mapped */
		ck_assert_int_eq(bfs_shard_detect(obj, BFS_COMP_AUTO), 0);
		ck_assert_int_eq(bfs_shard_compression(obj), bfs_shard_compression(file));
		ck_assert_msg(bfs_shard_scan(obj, true, NULL, NULL) == 0, "%s", bfs_err_msg());
		ck_assert_uint_eq(m.streams, 1); /* the scan is one pass in order */
		ck_assert_uint_eq(bfs_shard_nrecords(obj), r.n);
		for (uint64_t i = 0; i < r.n; i += 7) {
			ck_assert_int_eq(bfs_shard_read(obj, i, buf, 1 << 16, true), 0);
			ck_assert_int_eq(bfs_shard_read(file, i, want, 1 << 16, true), 0);
			ck_assert(memcmp(buf, want, r.len[i]) == 0);
		}
		for (size_t j = 0; j < 50; j++) {
			idx[j] = j * 8 + (kinds[k] == W_PLAIN ? 1 : 0);
			dst[j] = dmem + (j << 10);
		}
		bfs_shard_read_many(obj, idx, 50, dst, true, errs, msgs);
		for (size_t j = 0; j < 50; j++) {
			ck_assert_msg(errs[j] == 0, "%s", msgs[j]);
			ck_assert(memcmp(dst[j], r.data[idx[j]], r.len[idx[j]]) == 0);
		}
		/* a failing object: the message names it, the record and offset */
		m.fail = true;
		ck_assert_int_eq(bfs_shard_read(obj, 5, buf, 1 << 16, true), -EIO);
		ck_assert_msg(strstr(bfs_err_msg(), "record 5") &&
				      strstr(bfs_err_msg(), "connection reset"),
			      "%s", bfs_err_msg());
		bfs_shard_close(obj);
		ck_assert_uint_eq(m.closed, 1);
		bfs_shard_close(file);
		free(m.data);
		free(dmem);
	}
	free(stream);
	free(buf);
	free(want);
	recs_free(&r);
}
END_TEST

/* The frame check every reader makes (bfs_record_check_frame), on one
 * framed record: each field bad in turn, with and without verify, and the
 * two halves a streaming reader checks apart. */
START_TEST(frame_check_tells_each_field_of_a_record)
{
	static const uint8_t data[] = "seven bytes and more";
	const size_t len = sizeof(data) - 1;
	uint8_t rec[64], bad[64];
	const struct bfs_record_loc loc = { 4096, (uint32_t)len };
	const struct bfs_record_loc longer = { 4096, (uint32_t)len + 1 };
	const uint8_t *foot = rec + HDR_LEN + len;

	ck_assert_uint_eq(frame_one(rec, data, len), HDR_LEN + len + FOOT_LEN);
	ck_assert_int_eq(bfs_record_check_frame(3, &loc, rec, rec + HDR_LEN, foot, true), 0);
	ck_assert_int_eq(bfs_record_check_frame(3, &loc, rec, rec + HDR_LEN, foot, false), 0);

	/* the length against the index, verify or not */
	for (int verify = 0; verify < 2; verify++) {
		ck_assert_int_eq(bfs_record_check_frame(3, &longer, rec, NULL, NULL, verify),
				 -EBADMSG);
		ck_assert_str_eq(bfs_err_msg(), "record 3 at offset 4096: length 20 differs from "
						"the index (21); file changed?");
	}
	/* the length's CRC, with verify only */
	memcpy(bad, rec, sizeof(rec));
	bad[9] ^= 1;
	ck_assert_int_eq(bfs_record_check_frame(3, &loc, bad, bad + HDR_LEN, foot, false), 0);
	ck_assert_int_eq(bfs_record_check_frame(3, &loc, bad, bad + HDR_LEN, foot, true), -EBADMSG);
	ck_assert_ptr_nonnull(
		strstr(bfs_err_msg(), "record 3 at offset 4096: length CRC mismatch (stored 0x"));
	/* the data against its footer, with verify only; the header first */
	memcpy(bad, rec, sizeof(rec));
	bad[HDR_LEN + 5] ^= 0x40;
	ck_assert_int_eq(bfs_record_check_frame(3, &loc, bad, bad + HDR_LEN, foot, false), 0);
	ck_assert_int_eq(bfs_record_check_frame(3, &loc, bad, bad + HDR_LEN, foot, true), -EBADMSG);
	ck_assert_ptr_nonnull(
		strstr(bfs_err_msg(), "record 3 at offset 4096: data CRC mismatch (stored 0x"));
	bad[9] ^= 1;
	ck_assert_int_eq(bfs_record_check_frame(3, &loc, bad, bad + HDR_LEN, foot, true), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "length CRC mismatch"));
	/* the footer itself */
	memcpy(bad, rec, sizeof(rec));
	bad[HDR_LEN + len + 3] ^= 0x80;
	ck_assert_int_eq(
		bfs_record_check_frame(3, &loc, bad, bad + HDR_LEN, bad + HDR_LEN + len, true),
		-EBADMSG);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "data CRC mismatch"));
	/* a streaming reader's halves: the header alone (no data read yet),
	 * then the data alone */
	memcpy(bad, rec, sizeof(rec));
	bad[HDR_LEN] ^= 1;
	ck_assert_int_eq(bfs_record_check_frame(3, &loc, bad, NULL, NULL, true), 0);
	ck_assert_int_eq(bfs_record_check_frame(3, &loc, NULL, bad + HDR_LEN, foot, true),
			 -EBADMSG);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "data CRC mismatch"));
	ck_assert_int_eq(bfs_record_check_frame(3, &loc, NULL, bad + HDR_LEN, foot, false), 0);
	ck_assert_int_eq(bfs_record_check_frame(3, &loc, NULL, rec + HDR_LEN, foot, true), 0);
}
END_TEST

static Suite *record_suite(void)
{
	Suite *su = suite_create("record");
	TCase *tc;

	tc = tcase_create("crc32c");
	tcase_add_test(tc, crc32c_matches_the_standard_check_value);
	tcase_add_test(tc, crc32c_sw_matches_reference_and_hw_for_every_length_and_alignment);
	tcase_add_test(tc, crc32c_long_buffers_agree_across_interleave_boundaries);
	tcase_add_test(tc, crc32c_mask_roundtrips_and_matches_known_values);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(su, tc);

	tc = tcase_create("framing");
	tcase_add_test(tc, compression_names_parse_and_print);
	tcase_add_loop_test(tc, framing_roundtrips_and_compression_is_detected_from_bytes, 0,
			    BFS_ARRAY_SIZE(framing_cases));
	tcase_add_loop_test(tc, records_larger_than_the_scan_buffer_roundtrip, 0,
			    BFS_ARRAY_SIZE(framing_cases));
	tcase_add_test(tc, empty_file_is_a_plain_shard_with_no_records);
	tcase_add_test(tc, open_reports_missing_files_and_directories);
	tcase_add_test(tc, frame_check_tells_each_field_of_a_record);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(su, tc);

	tc = tcase_create("errors");
	tcase_add_loop_test(tc, scan_reports_each_framing_error_with_record_and_offset, 0,
			    BFS_ARRAY_SIZE(error_cases));
	tcase_add_loop_test(tc, scan_errors_are_the_same_inside_gzip, 0,
			    BFS_ARRAY_SIZE(error_cases));
	tcase_add_loop_test(tc, length_crc_hit_over_a_right_length_is_indexed_as_a_bad_record, 0,
			    2);
	tcase_add_test(tc, verify_off_skips_crc_checks_but_not_framing);
	tcase_add_test(tc, first_record_corrupt_is_not_a_tfrecord_unless_forced);
	tcase_add_test(tc, text_file_is_not_a_tfrecord);
	tcase_add_test(tc, corrupt_deflate_stream_is_reported_with_compressed_offset);
	tcase_add_test(tc, damaged_gzip_payload_fails_the_scan);
	tcase_add_loop_test(tc, truncated_compressed_trailer_is_an_error_after_all_records, 0,
			    BFS_ARRAY_SIZE(trunc_cases));
	tcase_add_test(tc, trailing_garbage_after_gzip_member_is_an_error);
	tcase_add_test(tc, scan_stops_when_the_callback_fails);
	tcase_add_test(tc, read_checks_index_buffer_size_and_changed_files);
	tcase_add_test(tc, mapped_shard_truncated_under_reads_is_eio);
	tcase_add_test(tc, unmapped_nearby_records_are_read_in_one_call);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(su, tc);

	tc = tcase_create("access");
	tcase_add_test(tc, random_access_reads_every_record_of_a_large_gzip_shard);
	tcase_add_loop_test(tc, concurrent_reads_from_four_threads_agree_with_the_scan, 0,
			    BFS_ARRAY_SIZE(concurrent_kinds));
	tcase_add_test(tc, set_index_roundtrips_into_a_fresh_shard);
	tcase_add_test(tc, many_shards_share_a_bounded_descriptor_cache);
	tcase_add_test(tc, shards_read_through_io_equal_files);
	tcase_set_timeout(tc, 600);
	suite_add_tcase(su, tc);

	return su;
}

int main(void)
{
	SRunner *sr;
	int failed;

	snprintf(tmpdir, sizeof(tmpdir), "%s/bfs-check-record-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	sr = srunner_create(record_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return failed ? 1 : 0;
}
