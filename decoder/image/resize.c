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
 * working set is a few rows, not a plane. A source row's samples are
 * converted to floats once (whatever number of taps reads each), then the
 * horizontal pass is
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

#ifdef __SSE2__
#include <emmintrin.h>
#endif

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

static double triangle(double x)
{
	x = fabs(x);
	return x < 1 ? 1 - x : 0;
}

/* BILINEAR_AA, PIL's way: the source pixels [*lo, *lo + *n) whose
 * triangle weight may be non-zero for the output sample centred at
 * `centre`, clipped to the source (support: the triangle's half-width) */
static void aa_window(double centre, double support, uint32_t len, uint32_t *lo, uint32_t *n)
{
	double a = trunc(centre - support + 0.5), b = trunc(centre + support + 0.5);
	uint32_t x0 = a < 0 ? 0 : a > len ? len : (uint32_t)a;
	uint32_t x1 = b < 0 ? 0 : b > len ? len : (uint32_t)b;

	/* PIL's window has a pixel of weight 0 at either end, often: left out */
	while (x1 > x0 + 1 && triangle((x0 + 0.5 - centre) / support) == 0)
		x0++;
	while (x1 > x0 + 1 && triangle((x1 - 0.5 - centre) / support) == 0)
		x1--;
	*lo = x0;
	*n = x1 > x0 ? x1 - x0 : 0;
}

/* The taps per output sample of BILINEAR_AA: the widest window */
static uint32_t aa_ntaps(uint32_t len, double start, double scale, uint32_t out)
{
	double support = scale > 1 ? scale : 1;
	uint32_t n = 1;

	for (uint32_t i = 0; i < out; i++) {
		uint32_t lo, k;

		aa_window(start + (i + 0.5) * scale, support, len, &lo, &k);
		n = k > n ? k : n;
	}
	return n;
}

/* Output sample i of BILINEAR_AA: its window's triangle weights,
 * normalized (a window with none is its nearest pixel alone) */
static void aa_taps(struct taps *t, uint32_t i, uint32_t len, double start, double scale)
{
	double fs = scale > 1 ? scale : 1, centre = start + (i + 0.5) * scale, sum = 0;
	float *w = t->w + (size_t)i * t->n;
	uint32_t lo, k;

	aa_window(centre, fs, len, &lo, &k);
	for (uint32_t x = 0; x < k; x++)
		sum += triangle((lo + x + 0.5 - centre) / fs);
	if (k == 0 || sum <= 0) { /* no pixel in reach: the nearest one */
		t->first[i] = centre < 0 ? 0 : centre >= len ? len - 1 : (uint32_t)centre;
		w[0] = 1;
		return;
	}
	t->first[i] = lo;
	for (uint32_t x = 0; x < k; x++)
		w[x] = (float)(triangle((lo + x + 0.5 - centre) / fs) / sum);
}

/* Taps of one axis: source length `len`, region [start, start+size) onto
 * `out` samples. */
static int make_taps(struct taps *t, uint32_t len, double start, double size, uint32_t out,
		     enum bfs_filter filter)
{
	double scale = size / out;

	t->n = filter == BFS_FILTER_BILINEAR	  ? 2
	       : filter == BFS_FILTER_BILINEAR_AA ? aa_ntaps(len, start, scale, out)
						  : (uint32_t)ceil(scale) + 2;
	t->first = calloc(out, sizeof(*t->first));
	t->w = calloc((size_t)out * t->n, sizeof(*t->w));
	if (!t->first || !t->w)
		return -ENOMEM;
	for (uint32_t i = 0; i < out; i++) {
		float *w = t->w + (size_t)i * t->n;

		if (filter == BFS_FILTER_BILINEAR_AA) {
			aa_taps(t, i, len, start, scale);
		} else if (filter == BFS_FILTER_BILINEAR) {
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

static inline v4f load4f(const float *p)
{
	v4f v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* f[i] = s[i] for i in [a, b): a row's samples as floats, converted once
 * however many taps read each */
static void row_to_float(float *restrict f, const uint8_t *restrict s, size_t a, size_t b)
{
	size_t i = a;

#ifdef __SSE2__ /* compilers turn a vector conversion of bytes into scalar code */
	const __m128i z = _mm_setzero_si128();

	for (; i + 16 <= b; i += 16) {
		__m128i u = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		__m128i lo = _mm_unpacklo_epi8(u, z), hi = _mm_unpackhi_epi8(u, z);

		_mm_storeu_ps(f + i, _mm_cvtepi32_ps(_mm_unpacklo_epi16(lo, z)));
		_mm_storeu_ps(f + i + 4, _mm_cvtepi32_ps(_mm_unpackhi_epi16(lo, z)));
		_mm_storeu_ps(f + i + 8, _mm_cvtepi32_ps(_mm_unpacklo_epi16(hi, z)));
		_mm_storeu_ps(f + i + 12, _mm_cvtepi32_ps(_mm_unpackhi_epi16(hi, z)));
	}
#endif
	for (; i < b; i++)
		f[i] = s[i];
}

/* One source row s (as floats) resampled horizontally into o (dw*c
 * floats); c and n are constants where it is inlined. */
static inline __attribute__((always_inline)) void hrow(const struct taps *tx,
						       const float *restrict s, unsigned c,
						       uint32_t n, uint32_t dw, float *restrict o)
{
	for (uint32_t i = 0; i < dw; i++) {
		const float *w = tx->w + (size_t)i * n;
		const float *p = s + (size_t)tx->first[i] * c;

		for (unsigned ch = 0; ch < c; ch++) {
			float v = 0;
			for (uint32_t k = 0; k < n; k++)
				v += w[k] * p[(size_t)k * c + ch];
			o[(size_t)i * c + ch] = v;
		}
	}
}

/* 3 or 4 channels: one pixel as one vector (4 floats read at each tap;
 * lane 3 of a 3-channel pixel is the next pixel's first sample, or the
 * row's padding, computed, stored, then overwritten by the next pixel).
 * With 3 channels the last output pixel (whose store would leave o) is
 * hrow's. */
static inline __attribute__((always_inline)) void hrowv(const struct taps *tx,
							const float *restrict s, unsigned c,
							uint32_t n, uint32_t dw, float *restrict o)
{
	uint32_t i = 0;

	for (; i < dw && (c == 4 || i + 1 < dw); i++) {
		const float *w = tx->w + (size_t)i * n;
		const float *p = s + (size_t)tx->first[i] * c;
		v4f v = { 0, 0, 0, 0 };

		for (uint32_t k = 0; k < n; k++)
			v += w[k] * load4f(p + (size_t)k * c);
		memcpy(o + (size_t)i * c, &v, sizeof(v));
	}
	if (i < dw) {
		struct taps rest = { n, tx->first + i, tx->w + (size_t)i * n };
		hrow(&rest, s, c, n, dw - i, o + (size_t)i * c);
	}
}

/* Source row s resampled horizontally into o; f: a row of sw * c + 4
 * floats, whose padding is 0 */
static void hpass(const struct taps *tx, const uint8_t *s, unsigned c, uint32_t sw, uint32_t dw,
		  float *f, float *o)
{
	size_t end = ((size_t)tx->first[dw - 1] + tx->n) * c;

	row_to_float(f, s, (size_t)tx->first[0] * c, end < (size_t)sw * c ? end : (size_t)sw * c);
	if (tx->n == 2 && c == 3)
		hrowv(tx, f, 3, 2, dw, o);
	else if (tx->n == 2 && c == 4)
		hrowv(tx, f, 4, 2, dw, o);
	else if (tx->n == 2 && c == 1)
		hrow(tx, f, 1, 2, dw, o);
	else if (tx->n == 3 && c == 3) /* BILINEAR_AA reducing by less than 1.5 */
		hrowv(tx, f, 3, 3, dw, o);
	else if (tx->n == 4 && c == 3) /* ... by 1.5 to 2 */
		hrowv(tx, f, 3, 4, dw, o);
	else if (c == 3)
		hrowv(tx, f, 3, tx->n, dw, o);
	else if (c == 4)
		hrowv(tx, f, 4, tx->n, dw, o);
	else
		hrow(tx, f, c, tx->n, dw, o);
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

#ifdef __SSE2__ /* 16 at a time, packed with saturation (the values are 0..255 by then) */
	const __m128 lo = _mm_setzero_ps(), hi = _mm_set1_ps(255), h = _mm_set1_ps(.5f);

	for (; x + 16 <= len; x += 16) {
		__m128i q[4];

		for (int k = 0; k < 4; k++) {
			__m128 v = _mm_add_ps(_mm_loadu_ps(acc + x + 4 * k), h);

			q[k] = _mm_cvttps_epi32(_mm_min_ps(_mm_max_ps(v, lo), hi));
		}
		_mm_storeu_si128(
			(__m128i *)(void *)(o + x),
			_mm_packus_epi16(_mm_packs_epi32(q[0], q[1]), _mm_packs_epi32(q[2], q[3])));
	}
#endif
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
	float *ring = NULL, *acc = NULL, *frow = NULL;
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
	frow = calloc((size_t)sw * c + 4, sizeof(float));
	if (!ring || !acc || !frow) {
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
			hpass(&tx, src + (size_t)next * sstride, c, sw, dw, frow,
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
	free(frow);
	taps_free(&tx);
	taps_free(&ty);
	return rc;
}
