/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bfs_gen — a fast, seeded generator of TFRecord shards for tests and
 * benchmarks. Independent of the project's decoder: the protobuf wire
 * encoding, the TFRecord framing and CRC32C are written out here by hand.
 *
 *   bfs_gen --out DIR --records N [--shards S] [--compression none|gzip|zlib]
 *           [--level L] [--seed K] [--unpacked] [--seq] [--quiet] FEATURE...
 *
 * FEATURE is  name:kind:count[,opt=...]          (a context feature)
 *        or  @name:kind:steps:count[,opt=...]   (a feature list, needs --seq)
 *   kind   float | int64 | bytes
 *   count  N or lo..hi (values per record, or per step; uniform per record)
 *   steps  N or lo..hi (steps per record)
 *   opts   missing=P  probability that the key is absent
 *          empty=P    probability that the key is present as `Feature {}`
 *                     (for a feature list: that a step is `Feature {}`)
 *          len=L | len=lo..hi   byte length of each bytes value (default 1..16)
 *
 * Records are split over the shards in contiguous runs (shard i holds
 * records [i*N/S, (i+1)*N/S)). The content of record r depends only on
 * (seed, r, the FEATURE list), not on the shard count or the compression.
 * Shards are DIR/part-00000.tfrecord (.gz for gzip, .zz for zlib).
 * --unpacked writes repeated numeric fields one tag per value.
 * --seq writes tf.train.SequenceExample (context = the plain features).
 *
 * Exit status: 0 ok, 2 usage error, 1 I/O error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

/* ---------------------------------------------------------------- CRC32C */

static uint32_t crc_tab[8][256];

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_tab[t][i] =
				(crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
}

/* Slicing-by-8 over the reflected Castagnoli polynomial. */
static uint32_t crc32c(const uint8_t *p, size_t n)
{
	uint32_t c = 0xFFFFFFFFu;
	while (n && ((uintptr_t)p & 7)) {
		c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		n--;
	}
	while (n >= 8) {
		uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				   (uint32_t)p[3] << 24);
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
			      (uint32_t)p[7] << 24;
		c = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^
		    crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^
		    crc_tab[2][(hi >> 8) & 0xff] ^ crc_tab[1][(hi >> 16) & 0xff] ^
		    crc_tab[0][hi >> 24];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c ^ 0xFFFFFFFFu;
}

static uint32_t crc_masked(const uint8_t *p, size_t n)
{
	uint32_t c = crc32c(p, n);
	return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---------------------------------------------------------------- random */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

struct rng {
	uint64_t s[2]; /* xorshift128+ */
};

static void rng_seed(struct rng *r, uint64_t seed, uint64_t record)
{
	uint64_t s = seed * 0xD1B54A32D192ED03ull ^ (record + 1) * 0x9E3779B97F4A7C15ull;
	r->s[0] = splitmix(&s);
	r->s[1] = splitmix(&s) | 1;
}

static inline uint64_t rng_next(struct rng *r)
{
	uint64_t a = r->s[0], b = r->s[1];
	r->s[0] = b;
	a ^= a << 23;
	r->s[1] = a ^ b ^ (a >> 17) ^ (b >> 26);
	return r->s[1] + b;
}

/* Uniform in [lo, hi] (hi - lo small; modulo bias is irrelevant here). */
static int64_t rng_range(struct rng *r, int64_t lo, int64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

static bool rng_chance(struct rng *r, double p)
{
	if (p <= 0)
		return false;
	return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0) < p;
}

static int64_t gen_int64(struct rng *r)
{
	uint64_t x = rng_next(r);
	switch (x & 3) {
	case 0:
		return (int64_t)((x >> 8) % 101) - 50; /* small, both signs */
	case 1:
		return (int64_t)((x >> 8) % 1000); /* small, non-negative */
	case 2:
		return (int64_t)(int32_t)(uint32_t)(x >> 16); /* 32-bit signed */
	default:
		return (int64_t)rng_next(r); /* any 64-bit value */
	}
}

static uint32_t gen_float_bits(struct rng *r)
{
	uint64_t x = rng_next(r);
	uint32_t sign = (uint32_t)(x & 1) << 31;
	switch ((x >> 1) & 15) {
	case 0:
		return sign; /* +-0.0 */
	case 1:
		return 0x3f800000u | sign; /* +-1.0 */
	default: {
		uint32_t exp = 127 - 24 + (uint32_t)((x >> 5) % 49); /* 2^-24 .. 2^24 */
		uint32_t mant = (uint32_t)(x >> 20) & 0x7fffffu;
		return sign | exp << 23 | mant;
	}
	}
}

static void gen_bytes(struct rng *r, uint8_t *p, size_t n)
{
	while (n >= 8) {
		uint64_t x = rng_next(r);
		memcpy(p, &x, 8);
		p += 8;
		n -= 8;
	}
	if (n) {
		uint64_t x = rng_next(r);
		memcpy(p, &x, n);
	}
}

/* ---------------------------------------------------------------- buffer */

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void die_oom(void)
{
	fprintf(stderr, "bfs_gen: out of memory\n");
	exit(1);
}

static void buf_reserve(struct buf *b, size_t more)
{
	if (b->len + more <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more)
		cap *= 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p)
		die_oom();
	b->p = p;
	b->cap = cap;
}

static inline void put_byte(struct buf *b, uint8_t v)
{
	b->p[b->len++] = v;
}

static inline void put_varint(struct buf *b, uint64_t v)
{
	while (v >= 0x80) {
		b->p[b->len++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->p[b->len++] = (uint8_t)v;
}

static inline void put_fixed32(struct buf *b, uint32_t v)
{
	b->p[b->len++] = (uint8_t)v;
	b->p[b->len++] = (uint8_t)(v >> 8);
	b->p[b->len++] = (uint8_t)(v >> 16);
	b->p[b->len++] = (uint8_t)(v >> 24);
}

static inline void put_raw(struct buf *b, const void *p, size_t n)
{
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static inline size_t vsz(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* ---------------------------------------------------------------- specs */

enum kind { K_BYTES = 1, K_FLOAT = 2, K_INT64 = 3 };

struct spec {
	char *name;
	size_t namelen;
	enum kind kind;
	bool is_list;
	int64_t cnt_lo, cnt_hi; /* values per record (or per step) */
	int64_t steps_lo, steps_hi;
	int64_t len_lo, len_hi; /* bytes value length */
	double missing, empty;
};

/* One generated Feature (one record's values, or one step's). */
struct fval {
	int state; /* 0 missing, 1 Feature {}, 2 has a kind */
	size_t n; /* number of values */
	size_t off; /* start in the record's value arrays */
	size_t size; /* encoded size of the Feature message */
};

struct gen {
	struct spec *specs;
	size_t nspecs;
	bool unpacked, seq;
	uint64_t seed;
	/* per-record scratch */
	int64_t *ints;
	size_t nints, capints;
	uint32_t *floats;
	size_t nfloats, capfloats;
	size_t *blens; /* byte lengths of bytes values */
	size_t *boffs; /* offsets of bytes values in bdata */
	size_t nb, capb;
	struct buf bdata;
	struct fval *fv; /* per (spec, step) features */
	size_t nfv, capfv;
	size_t *spec_first; /* index in fv of the first Feature of spec i */
	size_t *spec_count; /* number of Features (1 for context, steps for lists) */
	int *spec_state; /* lists: 0 missing, 2 present */
};

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		die_oom();
	return q;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bfs_gen --out DIR --records N [--shards S] [--compression none|gzip|zlib]\n"
		"               [--level L] [--seed K] [--unpacked] [--seq] [--quiet] FEATURE...\n"
		"  FEATURE: name:kind:count[,missing=P][,empty=P][,len=L|len=lo..hi]\n"
		"           @name:kind:steps:count[,...]   (feature list, with --seq)\n"
		"  kind: float|int64|bytes; count/steps: N or lo..hi\n");
	exit(2);
}

static bool parse_u64(const char *s, const char *end, int64_t *out)
{
	if (s == end)
		return false;
	int64_t v = 0;
	for (const char *p = s; p < end; p++) {
		if (*p < '0' || *p > '9')
			return false;
		if (v > (INT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (*p - '0');
	}
	*out = v;
	return true;
}

/* "N" or "lo..hi" in [s, end). */
static bool parse_range(const char *s, const char *end, int64_t *lo, int64_t *hi)
{
	const char *dots = NULL;
	for (const char *p = s; p + 1 < end; p++)
		if (p[0] == '.' && p[1] == '.') {
			dots = p;
			break;
		}
	if (!dots) {
		if (!parse_u64(s, end, lo))
			return false;
		*hi = *lo;
		return true;
	}
	return parse_u64(s, dots, lo) && parse_u64(dots + 2, end, hi) && *lo <= *hi;
}

static bool parse_prob(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || v < 0 || v > 1)
		return false;
	*out = v;
	return true;
}

static void parse_spec(struct spec *sp, const char *arg)
{
	memset(sp, 0, sizeof(*sp));
	sp->len_lo = 1;
	sp->len_hi = 16;
	const char *s = arg;
	if (*s == '@') {
		sp->is_list = true;
		s++;
	}
	const char *comma = strchr(s, ',');
	const char *main_end = comma ? comma : s + strlen(s);
	/* split name:kind:[steps:]count on ':' */
	const char *parts[4];
	size_t plen[4];
	int np = 0;
	const char *p = s;
	while (np < 4) {
		const char *c = memchr(p, ':', (size_t)(main_end - p));
		const char *e = c ? c : main_end;
		parts[np] = p;
		plen[np] = (size_t)(e - p);
		np++;
		if (!c)
			break;
		p = c + 1;
	}
	int want = sp->is_list ? 4 : 3;
	if (np != want || plen[0] == 0) {
		fprintf(stderr, "bfs_gen: bad feature '%s' (want %s)\n", arg,
			sp->is_list ? "@name:kind:steps:count" : "name:kind:count");
		usage();
	}
	sp->name = strndup(parts[0], plen[0]);
	sp->namelen = plen[0];
	if (plen[1] == 5 && !memcmp(parts[1], "float", 5))
		sp->kind = K_FLOAT;
	else if (plen[1] == 5 && !memcmp(parts[1], "int64", 5))
		sp->kind = K_INT64;
	else if (plen[1] == 5 && !memcmp(parts[1], "bytes", 5))
		sp->kind = K_BYTES;
	else {
		fprintf(stderr, "bfs_gen: bad kind in '%s' (float|int64|bytes)\n", arg);
		usage();
	}
	int ci = 2;
	if (sp->is_list) {
		if (!parse_range(parts[2], parts[2] + plen[2], &sp->steps_lo, &sp->steps_hi)) {
			fprintf(stderr, "bfs_gen: bad steps in '%s'\n", arg);
			usage();
		}
		ci = 3;
	}
	if (!parse_range(parts[ci], parts[ci] + plen[ci], &sp->cnt_lo, &sp->cnt_hi)) {
		fprintf(stderr, "bfs_gen: bad count in '%s'\n", arg);
		usage();
	}
	while (comma) {
		const char *o = comma + 1;
		comma = strchr(o, ',');
		size_t ol = comma ? (size_t)(comma - o) : strlen(o);
		char *opt = strndup(o, ol);
		bool ok;
		if (!strncmp(opt, "missing=", 8))
			ok = parse_prob(opt + 8, &sp->missing);
		else if (!strncmp(opt, "empty=", 6))
			ok = parse_prob(opt + 6, &sp->empty);
		else if (!strncmp(opt, "len=", 4))
			ok = sp->kind == K_BYTES &&
			     parse_range(opt + 4, opt + strlen(opt), &sp->len_lo, &sp->len_hi);
		else
			ok = false;
		if (!ok) {
			fprintf(stderr, "bfs_gen: bad option '%s' in '%s'\n", opt, arg);
			free(opt);
			usage();
		}
		free(opt);
	}
	if (sp->missing + sp->empty > 1) {
		fprintf(stderr, "bfs_gen: missing + empty > 1 in '%s'\n", arg);
		usage();
	}
}

/* ---------------------------------------------------------------- records */

static struct fval *new_fval(struct gen *g)
{
	if (g->nfv == g->capfv) {
		g->capfv = g->capfv ? g->capfv * 2 : 64;
		g->fv = xrealloc(g->fv, g->capfv * sizeof(*g->fv));
	}
	struct fval *f = &g->fv[g->nfv++];
	memset(f, 0, sizeof(*f));
	return f;
}

/* Size of the XxxList message inside a Feature. */
static size_t list_size(const struct gen *g, const struct spec *sp, const struct fval *f)
{
	size_t s = 0;
	if (f->n == 0)
		return 0;
	switch (sp->kind) {
	case K_INT64: {
		size_t payload = 0;
		for (size_t i = 0; i < f->n; i++)
			payload += vsz((uint64_t)g->ints[f->off + i]);
		s = g->unpacked ? payload + f->n : 1 + vsz(payload) + payload;
		break;
	}
	case K_FLOAT:
		s = g->unpacked ? 5 * f->n : 1 + vsz(4 * f->n) + 4 * f->n;
		break;
	case K_BYTES:
		for (size_t i = 0; i < f->n; i++) {
			size_t l = g->blens[f->off + i];
			s += 1 + vsz(l) + l;
		}
		break;
	}
	return s;
}

/* Draw the values of one Feature. */
static void draw_feature(struct gen *g, struct rng *r, const struct spec *sp, struct fval *f)
{
	f->n = (size_t)rng_range(r, sp->cnt_lo, sp->cnt_hi);
	switch (sp->kind) {
	case K_INT64:
		f->off = g->nints;
		if (g->nints + f->n > g->capints) {
			while (g->nints + f->n > g->capints)
				g->capints = g->capints ? g->capints * 2 : 256;
			g->ints = xrealloc(g->ints, g->capints * sizeof(*g->ints));
		}
		for (size_t i = 0; i < f->n; i++)
			g->ints[g->nints++] = gen_int64(r);
		break;
	case K_FLOAT:
		f->off = g->nfloats;
		if (g->nfloats + f->n > g->capfloats) {
			while (g->nfloats + f->n > g->capfloats)
				g->capfloats = g->capfloats ? g->capfloats * 2 : 256;
			g->floats = xrealloc(g->floats, g->capfloats * sizeof(*g->floats));
		}
		for (size_t i = 0; i < f->n; i++)
			g->floats[g->nfloats++] = gen_float_bits(r);
		break;
	case K_BYTES:
		f->off = g->nb;
		if (g->nb + f->n > g->capb) {
			while (g->nb + f->n > g->capb)
				g->capb = g->capb ? g->capb * 2 : 64;
			g->blens = xrealloc(g->blens, g->capb * sizeof(*g->blens));
			g->boffs = xrealloc(g->boffs, g->capb * sizeof(*g->boffs));
		}
		for (size_t i = 0; i < f->n; i++) {
			size_t l = (size_t)rng_range(r, sp->len_lo, sp->len_hi);
			buf_reserve(&g->bdata, l + 8);
			g->boffs[g->nb] = g->bdata.len;
			g->blens[g->nb] = l;
			gen_bytes(r, g->bdata.p + g->bdata.len, l);
			g->bdata.len += l;
			g->nb++;
		}
		break;
	}
	size_t ls = list_size(g, sp, f);
	f->size = 1 + vsz(ls) + ls;
}

static void gen_record(struct gen *g, uint64_t index)
{
	struct rng r;
	rng_seed(&r, g->seed, index);
	g->nints = g->nfloats = g->nb = g->nfv = 0;
	g->bdata.len = 0;
	for (size_t i = 0; i < g->nspecs; i++) {
		const struct spec *sp = &g->specs[i];
		g->spec_first[i] = g->nfv;
		if (!sp->is_list) {
			struct fval *f = new_fval(g);
			double u = (double)(rng_next(&r) >> 11) * (1.0 / 9007199254740992.0);
			if (u < sp->missing) {
				f->state = 0;
			} else if (u < sp->missing + sp->empty) {
				f->state = 1;
				f->size = 0;
			} else {
				f->state = 2;
				draw_feature(g, &r, sp, f);
			}
			g->spec_count[i] = 1;
			continue;
		}
		if (rng_chance(&r, sp->missing)) {
			g->spec_state[i] = 0;
			g->spec_count[i] = 0;
			continue;
		}
		g->spec_state[i] = 2;
		size_t steps = (size_t)rng_range(&r, sp->steps_lo, sp->steps_hi);
		g->spec_count[i] = steps;
		for (size_t s = 0; s < steps; s++) {
			struct fval *f = new_fval(g);
			if (rng_chance(&r, sp->empty)) {
				f->state = 1;
				f->size = 0;
			} else {
				f->state = 2;
				draw_feature(g, &r, sp, f);
			}
		}
	}
}

static void emit_feature(struct buf *b, const struct gen *g, const struct spec *sp,
			 const struct fval *f)
{
	/* Feature body: oneof kind { bytes_list = 1; float_list = 2; int64_list = 3; } */
	if (f->state == 1)
		return;
	size_t ls = list_size(g, sp, f);
	put_byte(b, (uint8_t)(sp->kind << 3 | 2));
	put_varint(b, ls);
	if (f->n == 0)
		return;
	switch (sp->kind) {
	case K_INT64:
		if (g->unpacked) {
			for (size_t i = 0; i < f->n; i++) {
				put_byte(b, 0x08);
				put_varint(b, (uint64_t)g->ints[f->off + i]);
			}
		} else {
			size_t payload = 0;
			for (size_t i = 0; i < f->n; i++)
				payload += vsz((uint64_t)g->ints[f->off + i]);
			put_byte(b, 0x0a);
			put_varint(b, payload);
			for (size_t i = 0; i < f->n; i++)
				put_varint(b, (uint64_t)g->ints[f->off + i]);
		}
		break;
	case K_FLOAT:
		if (g->unpacked) {
			for (size_t i = 0; i < f->n; i++) {
				put_byte(b, 0x0d);
				put_fixed32(b, g->floats[f->off + i]);
			}
		} else {
			put_byte(b, 0x0a);
			put_varint(b, 4 * f->n);
			for (size_t i = 0; i < f->n; i++)
				put_fixed32(b, g->floats[f->off + i]);
		}
		break;
	case K_BYTES:
		for (size_t i = 0; i < f->n; i++) {
			size_t l = g->blens[f->off + i];
			put_byte(b, 0x0a);
			put_varint(b, l);
			put_raw(b, g->bdata.p + g->boffs[f->off + i], l);
		}
		break;
	}
}

/* Map entry sizes: key = 1 (string), value = 2 (message). */
static size_t entry_size(size_t namelen, size_t valsize)
{
	return 1 + vsz(namelen) + namelen + 1 + vsz(valsize) + valsize;
}

static size_t featurelist_size(const struct gen *g, size_t i)
{
	size_t s = 0;
	for (size_t k = 0; k < g->spec_count[i]; k++) {
		size_t fs = g->fv[g->spec_first[i] + k].size;
		s += 1 + vsz(fs) + fs;
	}
	return s;
}

/* Encode the record built by gen_record into b (b->len reset first). */
static void encode_record(struct gen *g, struct buf *b)
{
	size_t ctx = 0, lists = 0;
	for (size_t i = 0; i < g->nspecs; i++) {
		const struct spec *sp = &g->specs[i];
		if (!sp->is_list) {
			const struct fval *f = &g->fv[g->spec_first[i]];
			if (f->state == 0)
				continue;
			size_t e = entry_size(sp->namelen, f->size);
			ctx += 1 + vsz(e) + e;
		} else if (g->spec_state[i]) {
			size_t e = entry_size(sp->namelen, featurelist_size(g, i));
			lists += 1 + vsz(e) + e;
		}
	}
	size_t total = 1 + vsz(ctx) + ctx;
	if (g->seq)
		total += 1 + vsz(lists) + lists;
	b->len = 0;
	buf_reserve(b, total + 16);
	/* Example.features = 1 / SequenceExample.context = 1 */
	put_byte(b, 0x0a);
	put_varint(b, ctx);
	for (size_t i = 0; i < g->nspecs; i++) {
		const struct spec *sp = &g->specs[i];
		if (sp->is_list)
			continue;
		const struct fval *f = &g->fv[g->spec_first[i]];
		if (f->state == 0)
			continue;
		put_byte(b, 0x0a);
		put_varint(b, entry_size(sp->namelen, f->size));
		put_byte(b, 0x0a);
		put_varint(b, sp->namelen);
		put_raw(b, sp->name, sp->namelen);
		put_byte(b, 0x12);
		put_varint(b, f->size);
		emit_feature(b, g, sp, f);
	}
	if (!g->seq)
		goto done;
	/* SequenceExample.feature_lists = 2 */
	put_byte(b, 0x12);
	put_varint(b, lists);
	for (size_t i = 0; i < g->nspecs; i++) {
		const struct spec *sp = &g->specs[i];
		if (!sp->is_list || !g->spec_state[i])
			continue;
		size_t fls = featurelist_size(g, i);
		put_byte(b, 0x0a);
		put_varint(b, entry_size(sp->namelen, fls));
		put_byte(b, 0x0a);
		put_varint(b, sp->namelen);
		put_raw(b, sp->name, sp->namelen);
		put_byte(b, 0x12);
		put_varint(b, fls);
		for (size_t k = 0; k < g->spec_count[i]; k++) {
			const struct fval *f = &g->fv[g->spec_first[i] + k];
			put_byte(b, 0x0a); /* FeatureList.feature = 1 */
			put_varint(b, f->size);
			emit_feature(b, g, sp, f);
		}
	}
done:
	if (b->len != total) {
		fprintf(stderr, "bfs_gen: internal error: encoded %zu bytes, sized %zu\n", b->len,
			total);
		exit(1);
	}
}

/* ---------------------------------------------------------------- output */

enum comp { C_NONE, C_GZIP, C_ZLIB };

struct out {
	FILE *fp;
	const char *path;
	enum comp comp;
	z_stream z;
	uint8_t *zbuf;
	size_t zcap;
};

static void io_fail(const char *path)
{
	fprintf(stderr, "bfs_gen: %s: %s\n", path, strerror(errno));
	exit(1);
}

static void out_open(struct out *o, const char *path, enum comp comp, int level)
{
	memset(o, 0, sizeof(*o));
	o->path = path;
	o->comp = comp;
	o->fp = fopen(path, "wb");
	if (!o->fp)
		io_fail(path);
	setvbuf(o->fp, NULL, _IOFBF, 1 << 20);
	if (comp != C_NONE) {
		int wbits = comp == C_GZIP ? 15 + 16 : 15;
		if (deflateInit2(&o->z, level, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
			fprintf(stderr, "bfs_gen: deflateInit2 failed\n");
			exit(1);
		}
		o->zcap = 1 << 18;
		o->zbuf = xrealloc(NULL, o->zcap);
	}
}

static void out_deflate(struct out *o, const uint8_t *p, size_t n, int flush)
{
	o->z.next_in = (uint8_t *)p;
	o->z.avail_in = (uInt)n;
	do {
		o->z.next_out = o->zbuf;
		o->z.avail_out = (uInt)o->zcap;
		int rc = deflate(&o->z, flush);
		if (rc == Z_STREAM_ERROR) {
			fprintf(stderr, "bfs_gen: deflate failed\n");
			exit(1);
		}
		size_t have = o->zcap - o->z.avail_out;
		if (have && fwrite(o->zbuf, 1, have, o->fp) != have)
			io_fail(o->path);
	} while (o->z.avail_out == 0);
}

static void out_write(struct out *o, const uint8_t *p, size_t n)
{
	if (o->comp == C_NONE) {
		if (fwrite(p, 1, n, o->fp) != n)
			io_fail(o->path);
		return;
	}
	/* deflate in pieces so avail_in (uInt) never overflows */
	while (n) {
		size_t k = n > (1u << 30) ? (1u << 30) : n;
		out_deflate(o, p, k, Z_NO_FLUSH);
		p += k;
		n -= k;
	}
}

static void out_close(struct out *o)
{
	if (o->comp != C_NONE) {
		int rc;
		o->z.next_in = NULL;
		o->z.avail_in = 0;
		do {
			o->z.next_out = o->zbuf;
			o->z.avail_out = (uInt)o->zcap;
			rc = deflate(&o->z, Z_FINISH);
			size_t have = o->zcap - o->z.avail_out;
			if (have && fwrite(o->zbuf, 1, have, o->fp) != have)
				io_fail(o->path);
		} while (rc == Z_OK);
		if (rc != Z_STREAM_END) {
			fprintf(stderr, "bfs_gen: deflate finish failed\n");
			exit(1);
		}
		deflateEnd(&o->z);
		free(o->zbuf);
	}
	if (fclose(o->fp) != 0)
		io_fail(o->path);
}

static void write_framed(struct out *o, const uint8_t *data, size_t n)
{
	uint8_t hdr[12], tail[4];
	uint64_t len = n;
	for (int i = 0; i < 8; i++)
		hdr[i] = (uint8_t)(len >> (8 * i));
	uint32_t c = crc_masked(hdr, 8);
	for (int i = 0; i < 4; i++)
		hdr[8 + i] = (uint8_t)(c >> (8 * i));
	c = crc_masked(data, n);
	for (int i = 0; i < 4; i++)
		tail[i] = (uint8_t)(c >> (8 * i));
	out_write(o, hdr, 12);
	out_write(o, data, n);
	out_write(o, tail, 4);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
	const char *outdir = NULL;
	int64_t nrec = -1, nshards = 1, level = 1;
	uint64_t seed = 0;
	enum comp comp = C_NONE;
	bool quiet = false;
	struct gen g;
	memset(&g, 0, sizeof(g));
	g.specs = xrealloc(NULL, (size_t)argc * sizeof(*g.specs));

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int64_t tmp;
		if (!strcmp(a, "--out") && v) {
			outdir = v;
			i++;
		} else if (!strcmp(a, "--records") && v) {
			if (!parse_u64(v, v + strlen(v), &nrec))
				usage();
			i++;
		} else if (!strcmp(a, "--shards") && v) {
			if (!parse_u64(v, v + strlen(v), &nshards) || nshards < 1 ||
			    nshards > 99999)
				usage();
			i++;
		} else if (!strcmp(a, "--level") && v) {
			if (!parse_u64(v, v + strlen(v), &level) || level > 9)
				usage();
			i++;
		} else if (!strcmp(a, "--seed") && v) {
			if (!parse_u64(v, v + strlen(v), &tmp))
				usage();
			seed = (uint64_t)tmp;
			i++;
		} else if (!strcmp(a, "--compression") && v) {
			if (!strcmp(v, "none"))
				comp = C_NONE;
			else if (!strcmp(v, "gzip"))
				comp = C_GZIP;
			else if (!strcmp(v, "zlib"))
				comp = C_ZLIB;
			else
				usage();
			i++;
		} else if (!strcmp(a, "--unpacked")) {
			g.unpacked = true;
		} else if (!strcmp(a, "--seq")) {
			g.seq = true;
		} else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
			quiet = true;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage();
		} else if (a[0] == '-' && a[1] == '-') {
			fprintf(stderr, "bfs_gen: unknown option '%s'\n", a);
			usage();
		} else {
			parse_spec(&g.specs[g.nspecs++], a);
		}
	}
	if (!outdir || nrec < 0)
		usage();
	for (size_t i = 0; i < g.nspecs; i++)
		if (g.specs[i].is_list && !g.seq) {
			fprintf(stderr, "bfs_gen: feature list '@%s' needs --seq\n",
				g.specs[i].name);
			usage();
		}
	g.seed = seed;
	g.spec_first = xrealloc(NULL, (g.nspecs + 1) * sizeof(size_t));
	g.spec_count = xrealloc(NULL, (g.nspecs + 1) * sizeof(size_t));
	g.spec_state = xrealloc(NULL, (g.nspecs + 1) * sizeof(int));
	crc_init();
	if (mkdir(outdir, 0755) != 0 && errno != EEXIST)
		io_fail(outdir);

	const char *ext = comp == C_GZIP   ? ".tfrecord.gz"
			  : comp == C_ZLIB ? ".tfrecord.zz"
					   : ".tfrecord";
	struct buf rec = { 0 };
	uint64_t total_bytes = 0;
	for (int64_t s = 0; s < nshards; s++) {
		char *path;
		if (asprintf(&path, "%s/part-%05" PRId64 "%s", outdir, s, ext) < 0)
			die_oom();
		struct out o;
		out_open(&o, path, comp, (int)level);
		uint64_t lo = (uint64_t)((__int128)nrec * s / nshards);
		uint64_t hi = (uint64_t)((__int128)nrec * (s + 1) / nshards);
		for (uint64_t r = lo; r < hi; r++) {
			gen_record(&g, r);
			encode_record(&g, &rec);
			write_framed(&o, rec.p, rec.len);
			total_bytes += rec.len + 16;
		}
		out_close(&o);
		if (!quiet)
			printf("%s %" PRIu64 "\n", path, hi - lo);
		free(path);
	}
	if (!quiet)
		fprintf(stderr, "bfs_gen: %" PRId64 " records, %" PRIu64 " bytes framed\n", nrec,
			total_bytes);
	return 0;
}
