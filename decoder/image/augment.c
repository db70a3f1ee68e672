/* SPDX-License-Identifier: Apache-2.0 */
/*
 * augment.c — the boxes and flips of crop= and flip= (see augment.h), line
 * for line the Python of docs/augment.md.
 *
 * Floating point is IEEE double as Python's: every operation here is one
 * of + - * / and sqrt, correctly rounded, plus log and exp from the C
 * library (the same functions Python's math module calls). A product that
 * feeds a sum goes through mul() so that no compiler fuses the two into
 * one fma, which rounds once where Python rounds twice. round() is
 * Python's: to nearest, ties to even (rint in the default rounding mode).
 */
#include "augment.h"

#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define G 0x9E3779B97F4A7C15ull
#define AUGMENT_SALT 0x6175676D656E74ull /* the bytes of "augment" */

/* The draw numbers of docs/augment.md: tries 0..9 take 2n (area) and
 * 2n + 1 (aspect ratio); then the box's place and the flip. */
#define DRAW_X 20
#define DRAW_Y 21
#define DRAW_FLIP 22
#define TRIES 10

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t key_of(const struct bfs_aug_key *k)
{
	uint64_t e = mix(mix(k->seed ^ AUGMENT_SALT) + G * (k->epoch + 1));

	return mix(e + G * (k->record + 1));
}

static uint64_t draw(uint64_t key, unsigned t)
{
	return mix(key + G * (t + 1));
}

/* [0, 1): the draw's top 53 bits */
static double uniform(uint64_t key, unsigned t)
{
	return (double)(draw(key, t) >> 11) * 0x1p-53;
}

/* [0, n) */
static uint64_t below(uint64_t key, unsigned t, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)draw(key, t) * n) >> 64);
}

/* a * b, rounded on its own (never fused into a following add) */
static double mul(double a, double b)
{
	volatile double r = a * b;
	return r;
}

/* Python's round() of a double that fits: ties to even */
static int64_t round_even(double v)
{
	return (int64_t)rint(v);
}

void bfs_augment_init(struct bfs_augment *a)
{
	memset(a, 0, sizeof(*a));
	a->scale[0] = 0.08;
	a->scale[1] = 1.0;
	a->ratio[0] = 3.0 / 4.0;
	a->ratio[1] = 4.0 / 3.0;
}

const char *bfs_crop_name(enum bfs_crop c)
{
	return c == BFS_CROP_RANDOM ? "random" : c == BFS_CROP_CENTER ? "center" : "none";
}

int bfs_crop_parse(const char *s, enum bfs_crop *out)
{
	if (strcmp(s, "random") == 0)
		*out = BFS_CROP_RANDOM;
	else if (strcmp(s, "center") == 0)
		*out = BFS_CROP_CENTER;
	else if (strcmp(s, "none") == 0)
		*out = BFS_CROP_NONE;
	else
		return -EINVAL;
	return 0;
}

/* "0.08", "1", "3/4": a positive finite number; end at *end */
static int number(const char *s, const char **end, double *out)
{
	char *e;
	double v = strtod(s, &e);

	if (e == s || !isfinite(v))
		return -EINVAL;
	if (*e == '/') {
		const char *q = e + 1;
		double d = strtod(q, &e);

		if (e == q || !isfinite(d) || d <= 0)
			return -EINVAL;
		v = v / d;
	}
	*end = e;
	*out = v;
	return 0;
}

int bfs_augment_range_parse(const char *s, double out[2])
{
	const char *e;
	double a, b;

	if (!s || *s == ' ' || *s == '+' || number(s, &e, &a) || *e != ':' || e[1] == ' ' ||
	    e[1] == '+' || number(e + 1, &e, &b) || *e)
		return -EINVAL;
	out[0] = a;
	out[1] = b;
	return 0;
}

uint32_t bfs_augment_resize(const struct bfs_augment *a, uint32_t H, uint32_t W)
{
	uint32_t m = H > W ? H : W;

	if (a->resize)
		return a->resize;
	return (uint32_t)round_even((double)m * 256 / 224);
}

int bfs_augment_check(const struct bfs_augment *a, uint32_t H, uint32_t W)
{
	if (!(a->scale[0] > 0 && a->scale[0] <= a->scale[1] && a->scale[1] <= 1))
		return bfs_err_set(-EINVAL,
				   "crop_scale %g:%g: need 0 < A <= B <= 1 (fractions of the "
				   "image's area)",
				   a->scale[0], a->scale[1]);
	if (!(a->ratio[0] > 0 && a->ratio[0] <= a->ratio[1] && isfinite(a->ratio[1])))
		return bfs_err_set(-EINVAL, "crop_ratio %g:%g: need 0 < A <= B (width / height)",
				   a->ratio[0], a->ratio[1]);
	if (a->crop == BFS_CROP_CENTER && bfs_augment_resize(a, H, W) < (H > W ? H : W))
		return bfs_err_set(-EINVAL,
				   "crop_resize %u is less than the output's %u: the centre "
				   "crop would not fit",
				   bfs_augment_resize(a, H, W), H > W ? H : W);
	return 0;
}

/* RandomResizedCrop's box of a w x h image (docs/augment.md, random_box) */
static void random_box(const struct bfs_augment *a, uint64_t key, uint32_t w, uint32_t h,
		       struct bfs_aug_box *out)
{
	double area = (double)w * (double)h;
	double lo = log(a->ratio[0]), hi = log(a->ratio[1]);
	double in_ratio = (double)w / (double)h;
	int64_t bw, bh;

	for (unsigned n = 0; n < TRIES; n++) {
		double target =
			area * (a->scale[0] + mul(a->scale[1] - a->scale[0], uniform(key, 2 * n)));
		double aspect = exp(lo + mul(hi - lo, uniform(key, 2 * n + 1)));

		bw = round_even(sqrt(target * aspect));
		bh = round_even(sqrt(target / aspect));
		if (bw > 0 && bw <= w && bh > 0 && bh <= h) {
			out->x = (uint32_t)below(key, DRAW_X, (uint64_t)(w - bw) + 1);
			out->y = (uint32_t)below(key, DRAW_Y, (uint64_t)(h - bh) + 1);
			out->w = (uint32_t)bw;
			out->h = (uint32_t)bh;
			return;
		}
	}
	/* ten misses: the central crop of the ratio clamped to the range */
	if (in_ratio < a->ratio[0]) {
		bw = w;
		bh = round_even((double)w / a->ratio[0]);
	} else if (in_ratio > a->ratio[1]) {
		bh = h;
		bw = round_even((double)h * a->ratio[1]);
	} else {
		bw = w;
		bh = h;
	}
	bw = bw < 1 ? 1 : bw > w ? w : bw;
	bh = bh < 1 ? 1 : bh > h ? h : bh;
	out->x = (uint32_t)((w - bw) / 2);
	out->y = (uint32_t)((h - bh) / 2);
	out->w = (uint32_t)bw;
	out->h = (uint32_t)bh;
}

/* Resize(R) + CenterCrop((H, W)) of a w x h image (docs/augment.md,
 * center_box): the region in source pixels, and the box it rounds to */
static void center_box(uint32_t R, uint32_t w, uint32_t h, uint32_t H, uint32_t W,
		       struct bfs_aug_box *out)
{
	uint64_t rw, rh;
	int64_t left, top, x, y, bw, bh;

	if (w <= h) {
		rw = R;
		rh = (uint64_t)((double)((uint64_t)R * h) / (double)w);
	} else {
		rh = R;
		rw = (uint64_t)((double)((uint64_t)R * w) / (double)h);
	}
	left = round_even((double)(rw - W) / 2.0);
	top = round_even((double)(rh - H) / 2.0);
	out->src.x = (double)((uint64_t)left * w) / (double)rw;
	out->src.y = (double)((uint64_t)top * h) / (double)rh;
	out->src.w = (double)((uint64_t)W * w) / (double)rw;
	out->src.h = (double)((uint64_t)H * h) / (double)rh;
	x = round_even(out->src.x);
	y = round_even(out->src.y);
	bw = round_even(out->src.w);
	bh = round_even(out->src.h);
	x = x > (int64_t)w - 1 ? (int64_t)w - 1 : x;
	y = y > (int64_t)h - 1 ? (int64_t)h - 1 : y;
	bw = bw < 1 ? 1 : bw > (int64_t)w - x ? (int64_t)w - x : bw;
	bh = bh < 1 ? 1 : bh > (int64_t)h - y ? (int64_t)h - y : bh;
	out->x = (uint32_t)x;
	out->y = (uint32_t)y;
	out->w = (uint32_t)bw;
	out->h = (uint32_t)bh;
	out->clip = false;
}

bool bfs_augment_flip(const struct bfs_augment *a, const struct bfs_aug_key *k)
{
	return a->flip && (draw(key_of(k), DRAW_FLIP) >> 63) != 0;
}

void bfs_augment_box(const struct bfs_augment *a, const struct bfs_aug_key *k, uint32_t w,
		     uint32_t h, uint32_t H, uint32_t W, struct bfs_aug_box *out)
{
	uint64_t key = key_of(k);

	memset(out, 0, sizeof(*out));
	if (a->crop == BFS_CROP_CENTER) {
		center_box(bfs_augment_resize(a, H, W), w, h, H, W, out);
	} else {
		random_box(a, key, w, h, out);
		out->src.x = out->x;
		out->src.y = out->y;
		out->src.w = out->w;
		out->src.h = out->h;
		out->clip = true;
	}
	out->flip = a->flip && (draw(key, DRAW_FLIP) >> 63) != 0;
}
