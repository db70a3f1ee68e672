/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_augment.c — unit tests of crop= and flip= (decoder/image/augment.c)
 * and of what they decode with: the boxes' invariants (inside the image,
 * the area and aspect ranges, a function of the key alone, a new box in a
 * new epoch, half the images flipped), the centre crop's geometry worked
 * out by hand, the part of a JPEG (jpegpart.c) against the whole decode
 * of the same image (every subsampling, progressive, gray, CMYK, every
 * IDCT scale), corrupt JPEGs failing whatever part is asked for, the
 * antialiased bilinear filter against PIL's formula written here, and the
 * flip as a mirror of the same box. The rule itself is held to
 * docs/augment.md's Python by tests/integration/test_augment.py.
 */
#include "augment.h"
#include "image.h"
#include "image_impl.h"
#include "resize.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

static struct bfs_augment random_aug(void)
{
	struct bfs_augment a;

	bfs_augment_init(&a);
	a.crop = BFS_CROP_RANDOM;
	return a;
}

START_TEST(random_boxes_lie_inside_and_keep_the_ranges)
{
	static const uint32_t sizes[][2] = { { 500, 375 }, { 375, 500 },   { 1, 1 },
					     { 7, 3000 },  { 3000, 7 },	   { 224, 224 },
					     { 64, 48 },   { 1920, 1080 }, { 4000, 100 },
					     { 2, 1 } };
	struct bfs_augment a = random_aug();
	unsigned fallback = 0, total = 0;

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint32_t w = sizes[s][0], h = sizes[s][1];

		for (uint64_t rec = 0; rec < 400; rec++) {
			struct bfs_aug_key k = { 3, rec % 7, rec };
			struct bfs_aug_box b;
			double area, ratio;

			bfs_augment_box(&a, &k, w, h, 224, 224, &b);
			ck_assert_msg(b.w >= 1 && b.h >= 1 && b.x + b.w <= w && b.y + b.h <= h,
				      "box %u,%u %ux%u outside %ux%u", b.x, b.y, b.w, b.h, w, h);
			ck_assert(b.clip);
			ck_assert(b.src.x == b.x && b.src.y == b.y && b.src.w == b.w &&
				  b.src.h == b.h);
			area = (double)b.w * b.h / ((double)w * h);
			if (w < 64 || h < 64 || w > 2 * h || h > 2 * w)
				continue; /* odd shapes: the tries fail often */
			total++;
			ratio = (double)b.w / b.h;
			/* a try that fits keeps its ranges up to the rounding of w and h */
			if (area >= 0.08 * 0.8 && ratio >= 0.75 * 0.8 && ratio <= 4.0 / 3 * 1.25)
				continue;
			fallback++;
			/* else the central crop of the clamped ratio */
			ck_assert_uint_eq(b.x, (w - b.w) / 2);
			ck_assert_uint_eq(b.y, (h - b.h) / 2);
		}
	}
	/* ten tries rarely all fail on a photograph's shape */
	ck_assert_msg(fallback < total / 50, "%u of %u boxes are the fallback", fallback, total);
}
END_TEST

START_TEST(random_boxes_are_a_function_of_the_key_and_the_size)
{
	struct bfs_augment a = random_aug();
	struct bfs_aug_key k = { 11, 2, 12345 }, k2;
	struct bfs_aug_box b1, b2;
	unsigned same_epoch_next = 0, same_record_epochs = 0, same_seed = 0;

	bfs_augment_box(&a, &k, 640, 480, 224, 224, &b1);
	bfs_augment_box(&a, &k, 640, 480, 224, 224, &b2);
	ck_assert(memcmp(&b1, &b2, sizeof(b1)) == 0);
	for (uint64_t i = 0; i < 200; i++) {
		k2 = (struct bfs_aug_key){ 11, 2, 12345 };
		k2.epoch = 3 + i;
		bfs_augment_box(&a, &k2, 640, 480, 224, 224, &b2);
		same_record_epochs += b1.x == b2.x && b1.y == b2.y && b1.w == b2.w && b1.h == b2.h;
		k2 = (struct bfs_aug_key){ 11, 2, 12346 + i };
		bfs_augment_box(&a, &k2, 640, 480, 224, 224, &b2);
		same_epoch_next += b1.x == b2.x && b1.y == b2.y && b1.w == b2.w && b1.h == b2.h;
		k2 = (struct bfs_aug_key){ 12 + i, 2, 12345 };
		bfs_augment_box(&a, &k2, 640, 480, 224, 224, &b2);
		same_seed += b1.x == b2.x && b1.y == b2.y && b1.w == b2.w && b1.h == b2.h;
	}
	ck_assert_uint_le(same_record_epochs, 1);
	ck_assert_uint_le(same_epoch_next, 1);
	ck_assert_uint_le(same_seed, 1);
}
END_TEST

START_TEST(half_the_images_flip_and_the_flip_ignores_the_crop)
{
	struct bfs_augment a = random_aug(), c = random_aug(), n;
	unsigned flips = 0;

	bfs_augment_init(&n);
	a.flip = c.flip = n.flip = true;
	c.crop = BFS_CROP_CENTER;
	for (uint64_t rec = 0; rec < 10000; rec++) {
		struct bfs_aug_key k = { 0, 1, rec };
		struct bfs_aug_box b1, b2;

		bfs_augment_box(&a, &k, 300, 200, 224, 224, &b1);
		bfs_augment_box(&c, &k, 900, 800, 224, 224, &b2);
		ck_assert(b1.flip == b2.flip);
		ck_assert(b1.flip == bfs_augment_flip(&n, &k));
		flips += b1.flip;
	}
	ck_assert_msg(flips > 4700 && flips < 5300, "%u of 10000 flipped", flips);
	a.flip = false;
	for (uint64_t rec = 0; rec < 100; rec++) {
		struct bfs_aug_key k = { 0, 1, rec };
		struct bfs_aug_box b;

		bfs_augment_box(&a, &k, 300, 200, 224, 224, &b);
		ck_assert(!b.flip);
	}
}
END_TEST

START_TEST(center_box_is_resize_then_crop)
{
	struct bfs_augment a;
	struct bfs_aug_key k = { 0, 0, 0 };
	struct bfs_aug_box b;

	bfs_augment_init(&a);
	a.crop = BFS_CROP_CENTER;
	ck_assert_uint_eq(bfs_augment_resize(&a, 224, 224), 256);
	ck_assert_uint_eq(bfs_augment_resize(&a, 100, 300), 343); /* round(300 * 256 / 224) */
	/* 500x375: shorter side 375 -> 256, the other int(256 * 500 / 375) =
	 * 341; left round(117 / 2) = 58 (ties to even), top 16 */
	bfs_augment_box(&a, &k, 500, 375, 224, 224, &b);
	ck_assert(!b.clip);
	ck_assert(fabs(b.src.x - 58.0 * 500 / 341) < 1e-9);
	ck_assert(fabs(b.src.y - 16.0 * 375 / 256) < 1e-9);
	ck_assert(fabs(b.src.w - 224.0 * 500 / 341) < 1e-9);
	ck_assert(fabs(b.src.h - 224.0 * 375 / 256) < 1e-9);
	ck_assert_uint_eq(b.x, 85); /* 85.04 */
	ck_assert_uint_eq(b.y, 23); /* 23.4 */
	ck_assert_uint_eq(b.w, 328); /* 328.4 */
	ck_assert_uint_eq(b.h, 328); /* 328.1 */
	/* a portrait image: the width is the shorter side */
	bfs_augment_box(&a, &k, 300, 600, 224, 224, &b);
	ck_assert(fabs(b.src.w - 224.0 * 300 / 256) < 1e-9);
	ck_assert(fabs(b.src.y - 144.0 * 600 / 512) < 1e-9); /* rh 512, top 144 */
	/* an image as large as the output at resize: the box is the middle */
	a.resize = 224;
	bfs_augment_box(&a, &k, 224, 300, 224, 224, &b);
	ck_assert_uint_eq(b.x, 0);
	ck_assert_uint_eq(b.y, 38);
	ck_assert_uint_eq(b.w, 224);
	ck_assert_uint_eq(b.h, 224);
}
END_TEST

START_TEST(options_parse_and_check)
{
	struct bfs_augment a;
	double r[2];
	enum bfs_crop c;

	ck_assert_int_eq(bfs_augment_range_parse("0.08:1", r), 0);
	ck_assert(r[0] == 0.08 && r[1] == 1);
	ck_assert_int_eq(bfs_augment_range_parse("3/4:4/3", r), 0);
	ck_assert(r[0] == 3.0 / 4 && r[1] == 4.0 / 3);
	ck_assert_int_eq(bfs_augment_range_parse("0.5", r), -EINVAL);
	ck_assert_int_eq(bfs_augment_range_parse("a:1", r), -EINVAL);
	ck_assert_int_eq(bfs_augment_range_parse("1:2:3", r), -EINVAL);
	ck_assert_int_eq(bfs_augment_range_parse("1/0:2", r), -EINVAL);
	ck_assert_int_eq(bfs_augment_range_parse("nan:2", r), -EINVAL);
	ck_assert_int_eq(bfs_crop_parse("random", &c), 0);
	ck_assert_int_eq(c, BFS_CROP_RANDOM);
	ck_assert_int_eq(bfs_crop_parse("centre", &c), -EINVAL);
	bfs_augment_init(&a);
	ck_assert_int_eq(bfs_augment_check(&a, 224, 224), 0);
	a.scale[0] = 0;
	ck_assert_int_eq(bfs_augment_check(&a, 224, 224), -EINVAL);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "crop_scale"));
	bfs_augment_init(&a);
	a.scale[1] = 1.5;
	ck_assert_int_eq(bfs_augment_check(&a, 224, 224), -EINVAL);
	bfs_augment_init(&a);
	a.ratio[0] = 2;
	ck_assert_int_eq(bfs_augment_check(&a, 224, 224), -EINVAL);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "crop_ratio"));
	bfs_augment_init(&a);
	a.crop = BFS_CROP_CENTER;
	a.resize = 200;
	ck_assert_int_eq(bfs_augment_check(&a, 224, 224), -EINVAL);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "crop_resize 200"));
	a.resize = 224;
	ck_assert_int_eq(bfs_augment_check(&a, 224, 224), 0);
}
END_TEST

/* ---- JPEGs made here ----------------------------------------------------------------- */

/* A w x h test image with edges and gradients (c channels; 4 = CMYK). */
static uint8_t *pattern(uint32_t w, uint32_t h, unsigned c, unsigned seed)
{
	uint8_t *p = malloc((size_t)w * h * c);

	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			for (unsigned k = 0; k < c; k++) {
				unsigned v =
					(x * (3 + k) + y * (5 + seed) + ((x / 7 + y / 5) % 3) * 60 +
					 (x * y * (k + 1) + seed * 31) % 23) &
					0xff;
				p[((size_t)y * w + x) * c + k] = (uint8_t)v;
			}
	return p;
}

/* A JPEG of the pattern: subsampling sub (TJSAMP_*), progressive or not,
 * gray (c 1), colour (c 3) or CMYK (c 4). */
static uint8_t *make_jpeg(uint32_t w, uint32_t h, unsigned c, int sub, bool progressive,
			  size_t *len)
{
	tjhandle th = tjInitCompress();
	uint8_t *pix = pattern(w, h, c, (unsigned)sub), *out = NULL, *copy;
	unsigned long n = 0;
	int pf = c == 1 ? TJPF_GRAY : c == 4 ? TJPF_CMYK : TJPF_RGB;
	int flags = progressive ? TJFLAG_PROGRESSIVE : 0;

	ck_assert_ptr_nonnull(th);
	ck_assert_int_eq(tjCompress2(th, pix, (int)w, 0, (int)h, pf, &out, &n,
				     c == 1 ? TJSAMP_GRAY : sub, 90, flags),
			 0);
	copy = malloc(n);
	memcpy(copy, out, n);
	tjFree(out);
	tjDestroy(th);
	free(pix);
	*len = n;
	return copy;
}

/* jpegpart's part against jpeg.c's whole decode at the same scale */
static void part_equals_whole(const uint8_t *jpg, size_t len, unsigned c, unsigned d,
			      struct bfs_rect want, const char *what)
{
	uint8_t *whole = NULL, *part = NULL;
	uint32_t ww, wh, sw, sh;
	struct bfs_rect got;
	int rc;

	rc = bfs_jpeg_decode(jpg, len, c, d, UINT64_MAX, &whole, &ww, &wh);
	ck_assert_msg(rc == 0, "%s: whole: %s", what, bfs_err_msg());
	rc = bfs_jpeg_decode_part(jpg, len, c, d, UINT64_MAX, want, &part, &got, &sw, &sh);
	ck_assert_msg(rc == 0, "%s: part: %s", what, bfs_err_msg());
	ck_assert_uint_eq(sw, ww);
	ck_assert_uint_eq(sh, wh);
	ck_assert(got.x <= want.x && got.y <= want.y && got.x + got.w >= want.x + want.w &&
		  got.y + got.h >= want.y + want.h && got.x + got.w <= sw && got.y + got.h <= sh);
	for (uint32_t y = want.y; y < want.y + want.h; y++) {
		const uint8_t *a = whole + ((size_t)y * ww + want.x) * c;
		const uint8_t *b = part + ((size_t)(y - got.y) * got.w + (want.x - got.x)) * c;

		ck_assert_msg(memcmp(a, b, (size_t)want.w * c) == 0,
			      "%s 1/%u: part %ux%u at %u,%u differs on row %u", what, d, want.w,
			      want.h, want.x, want.y, y);
	}
	free(whole);
	free(part);
}

START_TEST(a_part_holds_the_whole_decodes_pixels)
{
	static const struct {
		unsigned c;
		int sub;
		bool prog;
		const char *what;
	} kinds[] = {
		{ 3, TJSAMP_420, false, "4:2:0" }, { 3, TJSAMP_422, false, "4:2:2" },
		{ 3, TJSAMP_444, false, "4:4:4" }, { 3, TJSAMP_420, true, "progressive 4:2:0" },
		{ 1, TJSAMP_GRAY, false, "gray" }, { 4, TJSAMP_444, false, "CMYK" },
	};
	uint32_t w = 203, h = 157;
	unsigned seed = 1;

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		size_t len;
		uint8_t *jpg = make_jpeg(w, h, kinds[i].c, kinds[i].sub, kinds[i].prog, &len);

		for (unsigned d = 1; d <= 8; d *= 2) {
			uint32_t sw = (w + d - 1) / d, sh = (h + d - 1) / d;

			for (unsigned c = 1; c <= 4; c++) {
				if (c == 2)
					continue;
				for (int t = 0; t < 12; t++) {
					struct bfs_rect r;

					seed = seed * 1103515245u + 12345u;
					r.x = (seed >> 8) % sw;
					r.w = 1 + (seed >> 4) % (sw - r.x);
					seed = seed * 1103515245u + 12345u;
					r.y = (seed >> 8) % sh;
					r.h = 1 + (seed >> 4) % (sh - r.y);
					if (t == 0)
						r = (struct bfs_rect){ 0, 0, sw, sh };
					part_equals_whole(jpg, len, c, d, r, kinds[i].what);
				}
			}
		}
		free(jpg);
	}
}
END_TEST

START_TEST(a_corrupt_jpeg_fails_whatever_part_is_asked)
{
	size_t len;
	uint8_t *jpg = make_jpeg(320, 240, 3, TJSAMP_420, false, &len), *out = NULL;
	struct bfs_rect top = { 0, 0, 40, 16 }, got;
	uint32_t sw, sh;

	/* cut short two thirds in: the part at the top decodes from what is
	 * there, and still fails, as the whole decode does */
	ck_assert_int_eq(
		bfs_jpeg_decode_part(jpg, len * 2 / 3, 3, 1, UINT64_MAX, top, &out, &got, &sw, &sh),
		-EBADMSG);
	ck_assert_ptr_null(out);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "jpeg: "));
	ck_assert_int_eq(bfs_jpeg_decode(jpg, len * 2 / 3, 3, 1, UINT64_MAX, &out, &sw, &sh),
			 -EBADMSG);
	/* garbage in the entropy-coded data near the end */
	for (size_t i = len - 200; i < len - 150; i++)
		jpg[i] = 0xff;
	ck_assert_int_eq(
		bfs_jpeg_decode_part(jpg, len, 3, 2, UINT64_MAX, top, &out, &got, &sw, &sh),
		-EBADMSG);
	/* not a JPEG, a part outside, over the cap */
	ck_assert_int_eq(bfs_jpeg_decode_part((const uint8_t *)"\xff\xd8\xff\xe0 nope", 10, 3, 1,
					      UINT64_MAX, top, &out, &got, &sw, &sh),
			 -EBADMSG);
	free(jpg);
	jpg = make_jpeg(64, 48, 3, TJSAMP_420, false, &len);
	ck_assert_int_eq(bfs_jpeg_decode_part(jpg, len, 3, 1, UINT64_MAX,
					      (struct bfs_rect){ 60, 0, 5, 5 }, &out, &got, &sw,
					      &sh),
			 -EINVAL);
	ck_assert_int_eq(bfs_jpeg_decode_part(jpg, len, 3, 1, 1000, top, &out, &got, &sw, &sh),
			 -EBADMSG);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "cap"));
	free(jpg);
}
END_TEST

/* ---- the antialiased bilinear filter, against PIL's formula ---------------------------- */

/* PIL's ImagingResample weights of one axis (Resample.c's precompute_coeffs,
 * in double): out[i] = sum_k w[i][k] * src[k] */
static void pil_axis(double *wt, uint32_t in, double x0, double size, uint32_t out)
{
	double scale = size / out, fs = scale > 1 ? scale : 1, support = fs;

	memset(wt, 0, sizeof(double) * in * out);
	for (uint32_t i = 0; i < out; i++) {
		double centre = x0 + (i + 0.5) * scale, sum = 0;
		long lo = (long)(centre - support + 0.5), hi = (long)(centre + support + 0.5);

		lo = lo < 0 ? 0 : lo;
		hi = hi > (long)in ? (long)in : hi;
		for (long k = lo; k < hi; k++) {
			double d = fabs((k - centre + 0.5) / fs);
			wt[(size_t)i * in + (size_t)k] = d < 1 ? 1 - d : 0;
			sum += wt[(size_t)i * in + (size_t)k];
		}
		for (long k = lo; k < hi; k++)
			wt[(size_t)i * in + (size_t)k] /= sum;
	}
}

START_TEST(antialiased_bilinear_is_pils)
{
	static const struct {
		uint32_t sw, sh, dw, dh;
		double x, y, w, h;
	} cases[] = {
		{ 97, 61, 40, 30, 0, 0, 97, 61 }, /* reduce 2.4 x 2 */
		{ 97, 61, 40, 30, 3.5, 7.25, 60.5, 40 }, /* a fractional region */
		{ 30, 20, 77, 53, 0, 0, 30, 20 }, /* enlarge */
		{ 300, 9, 31, 9, 10, 0, 280, 9 }, /* reduce 9 x 1 */
		{ 64, 64, 64, 64, 0, 0, 64, 64 }, /* identity */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t sw = cases[i].sw, sh = cases[i].sh, dw = cases[i].dw, dh = cases[i].dh;
		uint8_t *src = pattern(sw, sh, 3, (unsigned)i), *dst = malloc((size_t)dw * dh * 3);
		double *wx = malloc(sizeof(double) * sw * dw),
		       *wy = malloc(sizeof(double) * sh * dh);
		struct bfs_region r = { cases[i].x, cases[i].y, cases[i].w, cases[i].h };
		int worst = 0;

		ck_assert_int_eq(bfs_resize(src, sw, sh, (size_t)sw * 3, 3, r, dst, dw, dh,
					    (size_t)dw * 3, BFS_FILTER_BILINEAR_AA),
				 0);
		pil_axis(wx, sw, r.x, r.w, dw);
		pil_axis(wy, sh, r.y, r.h, dh);
		for (uint32_t y = 0; y < dh; y++)
			for (uint32_t x = 0; x < dw; x++)
				for (int k = 0; k < 3; k++) {
					double v = 0;
					int d;

					for (uint32_t sy = 0; sy < sh; sy++)
						for (uint32_t sx = 0; sx < sw; sx++)
							v += wy[(size_t)y * sh + sy] *
							     wx[(size_t)x * sw + sx] *
							     src[((size_t)sy * sw + sx) * 3 + k];
					d = abs((int)floor(v + 0.5) -
						dst[((size_t)y * dw + x) * 3 + k]);
					worst = d > worst ? d : worst;
				}
		ck_assert_msg(worst <= 1, "case %zu: off by %d", i, worst);
		if (i == 4) /* the identity is exact */
			ck_assert_int_eq(memcmp(src, dst, (size_t)dw * dh * 3), 0);
		free(src);
		free(dst);
		free(wx);
		free(wy);
	}
}
END_TEST

START_TEST(a_flip_mirrors_the_same_box)
{
	size_t len;
	uint8_t *jpg = make_jpeg(300, 200, 3, TJSAMP_420, false, &len);
	struct bfs_image_target t = { .h = 48, .w = 64, .c = 3 };
	uint8_t a[48 * 64 * 3], b[48 * 64 * 3];
	struct bfs_augment plain = random_aug(), flip = random_aug();
	unsigned flipped = 0;

	flip.flip = true;
	for (uint64_t rec = 0; rec < 8; rec++) {
		struct bfs_aug_key k = { 5, 0, rec };
		struct bfs_aug_box ba, bb;

		ck_assert_int_eq(bfs_image_decode_aug(a, &t, &plain, &k, jpg, len, &ba), 0);
		ck_assert_int_eq(bfs_image_decode_aug(b, &t, &flip, &k, jpg, len, &bb), 0);
		ck_assert(ba.x == bb.x && ba.y == bb.y && ba.w == bb.w && ba.h == bb.h);
		ck_assert(!ba.flip);
		flipped += bb.flip;
		for (uint32_t y = 0; y < t.h; y++)
			for (uint32_t x = 0; x < t.w; x++)
				ck_assert(
					memcmp(a + ((size_t)y * t.w + x) * 3,
					       b + ((size_t)y * t.w + (bb.flip ? t.w - 1 - x : x)) *
							       3,
					       3) == 0);
	}
	ck_assert_uint_gt(flipped, 0);
	ck_assert_uint_lt(flipped, 8);
	free(jpg);
}
END_TEST

START_TEST(without_augmentation_the_bytes_are_image_s)
{
	size_t len;
	uint8_t *jpg = make_jpeg(300, 200, 3, TJSAMP_420, false, &len);
	struct bfs_image_target t = { .h = 50, .w = 70, .c = 3, .resize = BFS_RESIZE_CROP };
	uint8_t a[50 * 70 * 3], b[50 * 70 * 3];
	struct bfs_augment none;
	struct bfs_aug_key k = { 0, 0, 0 };
	struct bfs_aug_box box;

	bfs_augment_init(&none);
	ck_assert_int_eq(bfs_image_decode(a, &t, jpg, len), 0);
	ck_assert_int_eq(bfs_image_decode_aug(b, &t, &none, &k, jpg, len, &box), 0);
	ck_assert_int_eq(memcmp(a, b, sizeof(a)), 0);
	/* resize=crop's region: 300x200 covering 70x50 takes 280x200 */
	ck_assert_uint_eq(box.x, 10);
	ck_assert_uint_eq(box.w, 280);
	ck_assert_uint_eq(box.h, 200);
	ck_assert(!box.flip);
	free(jpg);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("augment");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, random_boxes_lie_inside_and_keep_the_ranges);
	tcase_add_test(tc, random_boxes_are_a_function_of_the_key_and_the_size);
	tcase_add_test(tc, half_the_images_flip_and_the_flip_ignores_the_crop);
	tcase_add_test(tc, center_box_is_resize_then_crop);
	tcase_add_test(tc, options_parse_and_check);
	tcase_add_test(tc, a_part_holds_the_whole_decodes_pixels);
	tcase_add_test(tc, a_corrupt_jpeg_fails_whatever_part_is_asked);
	tcase_add_test(tc, antialiased_bilinear_is_pils);
	tcase_add_test(tc, a_flip_mirrors_the_same_box);
	tcase_add_test(tc, without_augmentation_the_bytes_are_image_s);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
