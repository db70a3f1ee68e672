/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resize.c — separable bilinear and area resampling (see resize.h).
 *
 * Each axis gets a table of taps: for output index i, the first source
 * index and `n` weights that sum to 1, every tap inside the source (a tap
 * table near an edge is shifted inwards, its extra weights 0). A
 * horizontal pass turns a source row into dw*c floats; the vertical pass
 * blends the rows its taps name into an output row. Source rows are
 * resampled horizontally once each, as the output rows first need them,
 * into a ring of n rows (the taps' first rows never go back), so the
 * working set is a few rows, not a plane. The horizontal pass is
 * specialised for 1, 3 and 4 channels and 2 taps (bilinear) so that its
 * loops are straight-line code; the vertical pass is multiply-adds over
 * contiguous floats (restrict pointers), which the compiler vectorises.
 * Every sum is taken in tap order starting from 0, whatever the path.
 */
#include "resize.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct taps {
	uint32_t n; /* taps per output index */
	uint32_t *first; /* [out] first source index */
	float *w; /* [out][n] weights; unused taps 0 */
};

static void taps_free(struct taps *t)
{
	free(t->first);
	free(t->w);
}

static uint32_t clampi(double v, uint32_t len)
{
	if (v < 0)
		return 0;
	if (v > (double)(len - 1))
		return len - 1;
	return (uint32_t)v;
}

/* Taps of one axis: source length `len`, region [start, start+size) onto
 * `out` samples. */
static int make_taps(struct taps *t, uint32_t len, double start, double size, uint32_t out,
		     enum bfs_filter filter)
{
	double scale = size / out;

	t->n = filter == BFS_FILTER_BILINEAR ? 2 : (uint32_t)ceil(scale) + 2;
	t->first = calloc(out, sizeof(*t->first));
	t->w = calloc((size_t)out * t->n, sizeof(*t->w));
	if (!t->first || !t->w)
		return -ENOMEM;
	for (uint32_t i = 0; i < out; i++) {
		float *w = t->w + (size_t)i * t->n;

		if (filter == BFS_FILTER_BILINEAR) {
			double centre = start + (i + 0.5) * scale - 0.5;
			double f0 = floor(centre), frac = centre - f0;
			uint32_t a = clampi(f0, len), b = clampi(f0 + 1, len);

			/* taps are consecutive: a clamped pair collapses onto one */
			t->first[i] = a;
			if (b == a) {
				w[0] = 1;
			} else {
				w[0] = (float)(1 - frac);
				w[1] = (float)frac;
			}
		} else {
			double a = start + i * scale, b = a + scale, sum = 0;
			uint32_t p0 = clampi(floor(a), len);

			t->first[i] = p0;
			for (uint32_t k = 0; k < t->n; k++) {
				double lo = p0 + k, hi = lo + 1, ov;

				if (p0 + k >= len)
					break;
				ov = (hi < b ? hi : b) - (lo > a ? lo : a);
				if (ov > 0) {
					w[k] = (float)ov;
					sum += ov;
				}
			}
			if (sum <= 0) {
				w[0] = 1;
				sum = 1;
			}
			for (uint32_t k = 0; k < t->n; k++)
				w[k] = (float)(w[k] / sum);
		}
	}
	/* every tap inside the source: a table that reaches past the end is
	 * moved back, its weights moved up past zeros (the taps it loses had
	 * no source pixel, so their weights were 0); a source shorter than
	 * the table gets as many taps as it has pixels */
	if (t->n > len) { /* len taps from 0, each weight at its source index */
		float *nw = calloc((size_t)out * len, sizeof(*nw));

		if (!nw)
			return -ENOMEM;
		for (uint32_t i = 0; i < out; i++) {
			for (uint32_t k = 0; k < t->n && t->first[i] + k < len; k++)
				nw[(size_t)i * len + t->first[i] + k] = t->w[(size_t)i * t->n + k];
			t->first[i] = 0;
		}
		free(t->w);
		t->w = nw;
		t->n = len;
	}
	for (uint32_t i = 0; i < out; i++) {
		float *w = t->w + (size_t)i * t->n;
		uint32_t over = t->first[i] + t->n > len ? t->first[i] + t->n - len : 0;

		if (!over)
			continue;
		memmove(w + over, w, (t->n - over) * sizeof(float));
		for (uint32_t k = 0; k < over; k++)
			w[k] = 0;
		t->first[i] -= over;
	}
	return 0;
}

static uint8_t to_u8(float v)
{
	v += 0.5f;
	if (v <= 0)
		return 0;
	if (v >= 255)
		return 255;
	return (uint8_t)v;
}

/* Four floats (GCC/Clang vector extensions: SSE2 on x86-64, NEON on
 * arm64, plain code elsewhere); loads and stores go through memcpy. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint8_t v4u8 __attribute__((vector_size(4)));

static inline v4f load4u8(const uint8_t *p)
{
	v4u8 b;
	memcpy(&b, p, 4);
	return __builtin_convertvector(b, v4f);
}

static inline v4f load4f(const float *p)
{
	v4f v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* One source row s resampled horizontally into o (dw*c floats); c and n
 * are constants where it is inlined. */
static inline __attribute__((always_inline)) void hrow(const struct taps *tx,
						       const uint8_t *restrict s, unsigned c,
						       uint32_t n, uint32_t dw, float *restrict o)
{
	for (uint32_t i = 0; i < dw; i++) {
		const float *w = tx->w + (size_t)i * n;
		const uint8_t *p = s + (size_t)tx->first[i] * c;

		for (unsigned ch = 0; ch < c; ch++) {
			float v = 0;
			for (uint32_t k = 0; k < n; k++)
				v += w[k] * (float)p[(size_t)k * c + ch];
			o[(size_t)i * c + ch] = v;
		}
	}
}

/* 3 or 4 channels: one pixel as one vector (4 bytes read at each tap;
 * lane 3 of a 3-channel pixel is the next pixel's first sample, computed,
 * stored, then overwritten by the next pixel). With 3 channels, from the
 * first output pixel whose last tap is the last source pixel (its 4-byte
 * read would leave the row), and for the last output pixel (its store
 * would leave o), hrow finishes the row. */
static inline __attribute__((always_inline)) void hrowv(const struct taps *tx,
							const uint8_t *restrict s, unsigned c,
							uint32_t n, uint32_t sw, uint32_t dw,
							float *restrict o)
{
	uint32_t i = 0;

	for (; i < dw && (c == 4 || (i + 1 < dw && tx->first[i] + n < sw)); i++) {
		const float *w = tx->w + (size_t)i * n;
		const uint8_t *p = s + (size_t)tx->first[i] * c;
		v4f v = { 0, 0, 0, 0 };

		for (uint32_t k = 0; k < n; k++)
			v += w[k] * load4u8(p + (size_t)k * c);
		memcpy(o + (size_t)i * c, &v, sizeof(v));
	}
	if (i < dw) {
		struct taps rest = { n, tx->first + i, tx->w + (size_t)i * n };
		hrow(&rest, s, c, n, dw - i, o + (size_t)i * c);
	}
}

static void hpass(const struct taps *tx, const uint8_t *s, unsigned c, uint32_t sw, uint32_t dw,
		  float *o)
{
	if (tx->n == 2 && c == 3)
		hrowv(tx, s, 3, 2, sw, dw, o);
	else if (tx->n == 2 && c == 4)
		hrowv(tx, s, 4, 2, sw, dw, o);
	else if (tx->n == 2 && c == 1)
		hrow(tx, s, 1, 2, dw, o);
	else if (c == 3)
		hrowv(tx, s, 3, tx->n, sw, dw, o);
	else if (c == 4)
		hrowv(tx, s, 4, tx->n, sw, dw, o);
	else
		hrow(tx, s, c, tx->n, dw, o);
}

/* acc[x] += wk * row[x] */
static void vadd(float *restrict acc, const float *restrict row, float wk, size_t len)
{
	size_t x = 0;

	for (; x + 4 <= len; x += 4) {
		v4f a = load4f(acc + x) + wk * load4f(row + x);
		memcpy(acc + x, &a, sizeof(a));
	}
	for (; x < len; x++)
		acc[x] += wk * row[x];
}

/* o[x] = to_u8(acc[x]): + 0.5, clamped to 0..255, truncated */
static void vstore(uint8_t *restrict o, const float *restrict acc, size_t len)
{
	const v4f zero = { 0, 0, 0, 0 }, top = { 255, 255, 255, 255 },
		  half = { .5f, .5f, .5f, .5f };
	size_t x = 0;

	for (; x + 4 <= len; x += 4) {
		v4f v = load4f(acc + x) + half;
		v4i pos = v > zero, low = v < top;
		v4u8 b;

		v = (v4f)((v4i)v & pos);
		v = (v4f)(((v4i)v & low) | ((v4i)top & ~low));
		b = __builtin_convertvector(__builtin_convertvector(v, v4i), v4u8);
		memcpy(o + x, &b, 4);
	}
	for (; x < len; x++)
		o[x] = to_u8(acc[x]);
}

int bfs_resize(const uint8_t *src, uint32_t sw, uint32_t sh, size_t sstride, unsigned c,
	       struct bfs_region r, uint8_t *dst, uint32_t dw, uint32_t dh, size_t dstride,
	       enum bfs_filter filter)
{
	struct taps tx = { 0 }, ty = { 0 };
	size_t rowlen = (size_t)dw * c;
	float *ring = NULL, *acc = NULL;
	uint32_t next = 0; /* the next source row to resample horizontally */
	int rc;

	if (!sw || !sh || !dw || !dh || !c || c > 4 || !(r.w > 0) || !(r.h > 0))
		return -EINVAL;
	rc = make_taps(&tx, sw, r.x, r.w, dw, filter);
	if (!rc)
		rc = make_taps(&ty, sh, r.y, r.h, dh, filter);
	if (rc)
		goto out;
	ring = malloc((size_t)ty.n * rowlen * sizeof(float));
	acc = malloc(rowlen * sizeof(float));
	if (!ring || !acc) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t j = 0; j < dh; j++) {
		const float *w = ty.w + (size_t)j * ty.n;
		uint32_t f = ty.first[j];

		/* the rows f .. f+n-1 in the ring (slot: row mod n); rows below f
		 * are never needed again, as first[] does not decrease */
		if (next < f)
			next = f;
		for (; next < f + ty.n; next++)
			hpass(&tx, src + (size_t)next * sstride, c, sw, dw,
			      ring + (size_t)(next % ty.n) * rowlen);
		memset(acc, 0, rowlen * sizeof(float));
		for (uint32_t k = 0; k < ty.n; k++)
			if (w[k] != 0)
				vadd(acc, ring + (size_t)((f + k) % ty.n) * rowlen, w[k], rowlen);
		vstore(dst + (size_t)j * dstride, acc, rowlen);
	}
	rc = 0;
out:
	free(ring);
	free(acc);
	taps_free(&tx);
	taps_free(&ty);
	return rc;
}
