/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbtest.h — test helpers for check_example and check_schema: a tiny
 * protobuf wire writer (so tests build their records by hand, independent
 * of the generated code), and a reader of the shared real TFRecord files
 * that parses the framing itself (no CRC check; gzip through zlib, which
 * also reads plain files as they are).
 *
 * Header-only, static functions; include it from one test file each.
 */
#ifndef BFS_PBTEST_H
#define BFS_PBTEST_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define PB_UNUSED __attribute__((unused))

/* ---- protobuf writer ------------------------------------------------------ */

#define PB_CAP 16384

/* A message being written. Overflowing PB_CAP aborts the test. */
struct pb {
	size_t n;
	uint8_t d[PB_CAP];
};

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

static PB_UNUSED void pb_raw(struct pb *b, const void *p, size_t n)
{
	if (n > PB_CAP - b->n) {
		fprintf(stderr, "pbtest: message over %d bytes\n", PB_CAP);
		abort();
	}
	memcpy(b->d + b->n, p, n);
	b->n += n;
}

static PB_UNUSED void pb_varint(struct pb *b, uint64_t v)
{
	uint8_t c;

	do {
		c = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			c |= 0x80;
		pb_raw(b, &c, 1);
	} while (v);
}

static PB_UNUSED void pb_tag(struct pb *b, unsigned field, unsigned wt)
{
	pb_varint(b, ((uint64_t)field << 3) | wt);
}

/* A length-delimited field holding n bytes of p. */
static PB_UNUSED void pb_lenfield(struct pb *b, unsigned field, const void *p, size_t n)
{
	pb_tag(b, field, PB_LEN);
	pb_varint(b, n);
	pb_raw(b, p, n);
}

static PB_UNUSED void pb_str(struct pb *b, unsigned field, const char *s)
{
	pb_lenfield(b, field, s, strlen(s));
}

/* A sub-message field. */
static PB_UNUSED void pb_sub(struct pb *b, unsigned field, const struct pb *m)
{
	pb_lenfield(b, field, m->d, m->n);
}

static PB_UNUSED void pb_fixed32(struct pb *b, unsigned field, uint32_t v)
{
	uint8_t le[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };

	pb_tag(b, field, PB_I32);
	pb_raw(b, le, 4);
}

static PB_UNUSED void pb_fixed64(struct pb *b, unsigned field, uint64_t v)
{
	uint8_t le[8];

	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(v >> (8 * i));
	pb_tag(b, field, PB_I64);
	pb_raw(b, le, 8);
}

/* One of every wire type under field numbers no tf_example message uses. */
static PB_UNUSED void pb_unknowns(struct pb *b)
{
	pb_tag(b, 100, PB_VARINT);
	pb_varint(b, 300);
	pb_fixed64(b, 101, 0x0102030405060708ull);
	pb_str(b, 102, "unknown bytes");
	pb_fixed32(b, 103, 0xdeadbeef);
	pb_tag(b, 536870911, PB_VARINT); /* the largest field number */
	pb_varint(b, UINT64_MAX);
}

static PB_UNUSED uint32_t pb_f32bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

/* Feature{float_list{value: v...}}, packed or one field per value. */
static PB_UNUSED struct pb pb_float_feature(const float *v, size_t n, bool packed)
{
	struct pb list = { 0 }, feat = { 0 };

	if (packed) {
		struct pb raw = { 0 };
		for (size_t i = 0; i < n; i++) {
			uint32_t u = pb_f32bits(v[i]);
			uint8_t le[4] = { (uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16),
					  (uint8_t)(u >> 24) };
			pb_raw(&raw, le, 4);
		}
		pb_sub(&list, 1, &raw);
	} else {
		for (size_t i = 0; i < n; i++)
			pb_fixed32(&list, 1, pb_f32bits(v[i]));
	}
	pb_sub(&feat, 2, &list);
	return feat;
}

/* Feature{int64_list{value: v...}}, packed or one field per value. */
static PB_UNUSED struct pb pb_int_feature(const int64_t *v, size_t n, bool packed)
{
	struct pb list = { 0 }, feat = { 0 };

	if (packed) {
		struct pb raw = { 0 };
		for (size_t i = 0; i < n; i++)
			pb_varint(&raw, (uint64_t)v[i]);
		pb_sub(&list, 1, &raw);
	} else {
		for (size_t i = 0; i < n; i++) {
			pb_tag(&list, 1, PB_VARINT);
			pb_varint(&list, (uint64_t)v[i]);
		}
	}
	pb_sub(&feat, 3, &list);
	return feat;
}

/* Feature{bytes_list{value: s...}} of NUL-terminated strings. */
static PB_UNUSED struct pb pb_bytes_feature(const char *const *s, size_t n)
{
	struct pb list = { 0 }, feat = { 0 };

	for (size_t i = 0; i < n; i++)
		pb_str(&list, 1, s[i]);
	pb_sub(&feat, 1, &list);
	return feat;
}

/* A map entry {key: name, value: m} (for Features and FeatureLists). */
static PB_UNUSED struct pb pb_entry(const char *name, const struct pb *m)
{
	struct pb e = { 0 };

	pb_str(&e, 1, name);
	if (m)
		pb_sub(&e, 2, m);
	return e;
}

/* Append entry {name: m} to a Features / FeatureLists message. */
static PB_UNUSED void pb_add(struct pb *map, const char *name, const struct pb *m)
{
	struct pb e = pb_entry(name, m);

	pb_sub(map, 1, &e);
}

/* Example{features: f} (or SequenceExample{context: f, feature_lists: l}). */
static PB_UNUSED struct pb pb_example(const struct pb *features, const struct pb *lists)
{
	struct pb ex = { 0 };

	if (features)
		pb_sub(&ex, 1, features);
	if (lists)
		pb_sub(&ex, 2, lists);
	return ex;
}

/* ---- real TFRecord files ----------------------------------------------------- */

/* The shared real test data directory (BFS_TESTDATA overrides). */
static PB_UNUSED const char *realdata_dir(void)
{
	const char *env = getenv("BFS_TESTDATA");

	return env && env[0] ? env : SRCDIR "/../shared/testdata/real";
}

/* Read a whole (maybe gzip) file; NULL on failure. */
static PB_UNUSED uint8_t *realdata_read(const char *path, size_t *len)
{
	gzFile gz = gzopen(path, "rb");
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0;

	if (!gz)
		return NULL;
	for (;;) {
		int got;
		if (cap - n < 65536) {
			uint8_t *p = realloc(buf, cap ? cap * 2 : 1 << 20);
			if (!p)
				goto fail;
			buf = p;
			cap = cap ? cap * 2 : 1 << 20;
		}
		got = gzread(gz, buf + n, 65536);
		if (got < 0)
			goto fail;
		if (got == 0)
			break;
		n += (size_t)got;
	}
	gzclose(gz);
	*len = n;
	return buf;
fail:
	gzclose(gz);
	free(buf);
	return NULL;
}

/* Call fn(ctx, data, len) for each record of a TFRecord image; the number of
 * records, or -1 if the framing is broken. */
static PB_UNUSED long realdata_records(const uint8_t *buf, size_t n,
				       void (*fn)(void *ctx, const uint8_t *data, size_t len),
				       void *ctx)
{
	size_t pos = 0;
	long count = 0;

	while (pos < n) {
		uint64_t len = 0;
		if (n - pos < 12)
			return -1;
		for (int i = 0; i < 8; i++)
			len |= (uint64_t)buf[pos + i] << (8 * i);
		pos += 12;
		if (len > n - pos || n - pos - len < 4)
			return -1;
		fn(ctx, buf + pos, (size_t)len);
		pos += (size_t)len + 4;
		count++;
	}
	return count;
}

static PB_UNUSED int realdata_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names of the TFRecord files in the real data directory
 * (everything but MANIFEST.md and hidden files); NULL if it is missing. */
static PB_UNUSED char **realdata_files(size_t *count)
{
	DIR *d = opendir(realdata_dir());
	struct dirent *e;
	char **names = NULL;
	size_t n = 0;

	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || strstr(e->d_name, ".md"))
			continue;
		names = realloc(names, (n + 1) * sizeof(*names));
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), realdata_name_cmp);
	*count = n;
	return names;
}

static PB_UNUSED void realdata_files_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

#endif
