/*
 * resize.c — separable bilinear and area resampling (see resize.h).
 *
 * Each axis gets a table of taps: for output index i, the first source
 * index and up to `ntaps` weights that sum to 1. A horizontal pass turns
 * every source row the vertical taps touch into dw*c floats; a vertical
 * pass blends those rows into the output. Both inner loops are plain
 * multiply-adds over contiguous floats, which the compiler vectorises.
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

int bfs_resize(const uint8_t *src, uint32_t sw, uint32_t sh, size_t sstride, unsigned c,
	       struct bfs_region r, uint8_t *dst, uint32_t dw, uint32_t dh, size_t dstride,
	       enum bfs_filter filter)
{
	struct taps tx = { 0 }, ty = { 0 };
	uint32_t y0, y1;
	size_t rowlen = (size_t)dw * c;
	float *plane = NULL, *acc = NULL;
	int rc;

	if (!sw || !sh || !dw || !dh || !c || c > 4 || !(r.w > 0) || !(r.h > 0))
		return -EINVAL;
	rc = make_taps(&tx, sw, r.x, r.w, dw, filter);
	if (!rc)
		rc = make_taps(&ty, sh, r.y, r.h, dh, filter);
	if (rc)
		goto out;
	/* the source rows the vertical taps reach */
	y0 = ty.first[0];
	y1 = y0;
	for (uint32_t j = 0; j < dh; j++) {
		uint32_t last = ty.first[j] + ty.n - 1;
		if (last > sh - 1)
			last = sh - 1;
		if (ty.first[j] < y0)
			y0 = ty.first[j];
		if (last > y1)
			y1 = last;
	}
	plane = malloc((size_t)(y1 - y0 + 1) * rowlen * sizeof(float));
	acc = malloc(rowlen * sizeof(float));
	if (!plane || !acc) {
		rc = -ENOMEM;
		goto out;
	}
	/* horizontal pass */
	for (uint32_t y = y0; y <= y1; y++) {
		const uint8_t *s = src + (size_t)y * sstride;
		float *o = plane + (size_t)(y - y0) * rowlen;

		for (uint32_t i = 0; i < dw; i++) {
			const float *w = tx.w + (size_t)i * tx.n;
			uint32_t f = tx.first[i];
			float v[4] = { 0, 0, 0, 0 };

			for (uint32_t k = 0; k < tx.n && f + k < sw; k++) {
				const uint8_t *p = s + (size_t)(f + k) * c;
				for (unsigned ch = 0; ch < c; ch++)
					v[ch] += w[k] * (float)p[ch];
			}
			for (unsigned ch = 0; ch < c; ch++)
				o[(size_t)i * c + ch] = v[ch];
		}
	}
	/* vertical pass */
	for (uint32_t j = 0; j < dh; j++) {
		const float *w = ty.w + (size_t)j * ty.n;
		uint32_t f = ty.first[j];
		uint8_t *o = dst + (size_t)j * dstride;

		memset(acc, 0, rowlen * sizeof(float));
		for (uint32_t k = 0; k < ty.n && f + k < sh; k++) {
			const float *row = plane + (size_t)(f + k - y0) * rowlen;
			float wk = w[k];
			if (wk == 0)
				continue;
			for (size_t x = 0; x < rowlen; x++)
				acc[x] += wk * row[x];
		}
		for (size_t x = 0; x < rowlen; x++)
			o[x] = to_u8(acc[x]);
	}
	rc = 0;
out:
	free(plane);
	free(acc);
	taps_free(&tx);
	taps_free(&ty);
	return rc;
}
