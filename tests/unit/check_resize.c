/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_resize.c — unit tests of the resampler (decoder/image/resize.c) on cases
 * worked out by hand, and of the stretch / fit / crop geometry of
 * bfs_image_decode (decoder/image/image.c) on small PNGs built here.
 */
#include "image.h"
#include "resize.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const struct bfs_region FULL1x4 = { 0, 0, 4, 1 };

/* One row (sh = 1, c = 1) of sw samples resized to dw samples. */
static void row(const uint8_t *src, uint32_t sw, struct bfs_region r, uint8_t *dst, uint32_t dw,
		enum bfs_filter f)
{
	ck_assert_int_eq(bfs_resize(src, sw, 1, sw, 1, r, dst, dw, 1, dw, f), 0);
}

START_TEST(identity_is_exact_for_both_filters_and_every_channel_count)
{
	static const unsigned cs[] = { 1, 3, 4 };
	uint32_t w = 13, h = 7;

	for (unsigned ci = 0; ci < 3; ci++) {
		unsigned c = cs[ci];
		uint8_t *src = malloc((size_t)w * h * c), *dst = malloc((size_t)w * h * c);
		struct bfs_region r = { 0, 0, w, h };

		for (size_t i = 0; i < (size_t)w * h * c; i++)
			src[i] = (uint8_t)(i * 37 + 11);
		for (int f = 0; f < 2; f++) {
			memset(dst, 0xaa, (size_t)w * h * c);
			ck_assert_int_eq(bfs_resize(src, w, h, (size_t)w * c, c, r, dst, w, h,
						    (size_t)w * c, (enum bfs_filter)f),
					 0);
			ck_assert_msg(memcmp(src, dst, (size_t)w * h * c) == 0,
				      "identity changed pixels (c=%u, filter %d)", c, f);
		}
		free(src);
		free(dst);
	}
}
END_TEST

START_TEST(bilinear_known_rows)
{
	/* upscale [0, 100] to 4: centres -0.25 (clamped to 0), 0.25, 0.75,
	 * 1.25 (clamped to 1) */
	const uint8_t up[2] = { 0, 100 };
	const uint8_t down[4] = { 10, 20, 30, 40 };
	uint8_t out[4];

	row(up, 2, (struct bfs_region){ 0, 0, 2, 1 }, out, 4, BFS_FILTER_BILINEAR);
	ck_assert_int_eq(out[0], 0);
	ck_assert_int_eq(out[1], 25);
	ck_assert_int_eq(out[2], 75);
	ck_assert_int_eq(out[3], 100);
	/* halve: centres 0.5 and 2.5, the means of the pairs */
	row(down, 4, FULL1x4, out, 2, BFS_FILTER_BILINEAR);
	ck_assert_int_eq(out[0], 15);
	ck_assert_int_eq(out[1], 35);
	/* to 3: centres 1/6, 3/2, 17/6 -> 11.67, 25, 38.33 */
	row(down, 4, FULL1x4, out, 3, BFS_FILTER_BILINEAR);
	ck_assert_int_eq(out[0], 12);
	ck_assert_int_eq(out[1], 25);
	ck_assert_int_eq(out[2], 38);
}
END_TEST

START_TEST(area_known_rows)
{
	const uint8_t a[4] = { 10, 20, 30, 40 }, b[3] = { 0, 30, 60 }, half[2] = { 0, 1 };
	const uint8_t third[3] = { 0, 0, 1 }, two[2] = { 0, 100 };
	uint8_t out[4];

	row(a, 4, FULL1x4, out, 2, BFS_FILTER_AREA); /* pairs: 15, 35 */
	ck_assert_int_eq(out[0], 15);
	ck_assert_int_eq(out[1], 35);
	row(a, 4, FULL1x4, out, 1, BFS_FILTER_AREA); /* all: 25 */
	ck_assert_int_eq(out[0], 25);
	/* 3 -> 2: [0, 1.5) = (0 + 30/2) / 1.5 = 10; [1.5, 3) = (15 + 60) / 1.5 = 50 */
	row(b, 3, (struct bfs_region){ 0, 0, 3, 1 }, out, 2, BFS_FILTER_AREA);
	ck_assert_int_eq(out[0], 10);
	ck_assert_int_eq(out[1], 50);
	/* rounding to nearest, halves up: 0.5 -> 1, 1/3 -> 0 */
	row(half, 2, (struct bfs_region){ 0, 0, 2, 1 }, out, 1, BFS_FILTER_AREA);
	ck_assert_int_eq(out[0], 1);
	row(third, 3, (struct bfs_region){ 0, 0, 3, 1 }, out, 1, BFS_FILTER_AREA);
	ck_assert_int_eq(out[0], 0);
	/* a region: pixels 1..2 -> 25; a fractional one [0.5, 1.5) -> 50 */
	row(a, 4, (struct bfs_region){ 1, 0, 2, 1 }, out, 1, BFS_FILTER_AREA);
	ck_assert_int_eq(out[0], 25);
	row(two, 2, (struct bfs_region){ 0.5, 0, 1, 1 }, out, 1, BFS_FILTER_AREA);
	ck_assert_int_eq(out[0], 50);
}
END_TEST

START_TEST(two_dimensions_and_channels_are_separable)
{
	/* 2x2 RGB: each channel its own bilinear/area mean to 1x1 */
	const uint8_t src[12] = { 0, 10, 200, 100, 20, 200, 100, 30, 200, 200, 41, 200 };
	uint8_t out[3];

	for (int f = 0; f < 2; f++) {
		ck_assert_int_eq(bfs_resize(src, 2, 2, 6, 3, (struct bfs_region){ 0, 0, 2, 2 }, out,
					    1, 1, 3, (enum bfs_filter)f),
				 0);
		ck_assert_int_eq(out[0], 100); /* (0 + 100 + 100 + 200) / 4 */
		ck_assert_int_eq(out[1], 25); /* 101 / 4 = 25.25 */
		ck_assert_int_eq(out[2], 200);
	}
}
END_TEST

START_TEST(one_pixel_source_fills_everything)
{
	const uint8_t src[4] = { 7, 8, 9, 10 };
	uint8_t out[5 * 3 * 4];

	for (int f = 0; f < 2; f++) {
		ck_assert_int_eq(bfs_resize(src, 1, 1, 4, 4, (struct bfs_region){ 0, 0, 1, 1 }, out,
					    5, 3, 20, (enum bfs_filter)f),
				 0);
		for (int i = 0; i < 15; i++)
			ck_assert(memcmp(out + i * 4, src, 4) == 0);
	}
}
END_TEST

START_TEST(strides_are_honoured)
{
	/* 3x2 gray with 5-byte source rows, into 3x2 with 4-byte rows */
	const uint8_t src[10] = { 1, 2, 3, 99, 99, 4, 5, 6, 99, 99 };
	uint8_t out[8];

	memset(out, 0xee, sizeof(out));
	ck_assert_int_eq(bfs_resize(src, 3, 2, 5, 1, (struct bfs_region){ 0, 0, 3, 2 }, out, 3, 2,
				    4, BFS_FILTER_BILINEAR),
			 0);
	ck_assert_int_eq(out[0], 1);
	ck_assert_int_eq(out[2], 3);
	ck_assert_int_eq(out[3], 0xee); /* padding left alone */
	ck_assert_int_eq(out[4], 4);
	ck_assert_int_eq(out[6], 6);
	ck_assert_int_eq(out[7], 0xee);
}
END_TEST

START_TEST(bad_arguments_are_einval)
{
	const uint8_t src[4] = { 0 };
	uint8_t out[4];
	struct bfs_region r = { 0, 0, 2, 2 };

	ck_assert_int_eq(bfs_resize(src, 0, 2, 2, 1, r, out, 2, 2, 2, BFS_FILTER_AREA), -EINVAL);
	ck_assert_int_eq(bfs_resize(src, 2, 2, 2, 1, r, out, 0, 2, 2, BFS_FILTER_AREA), -EINVAL);
	ck_assert_int_eq(bfs_resize(src, 2, 2, 2, 5, r, out, 2, 2, 2, BFS_FILTER_AREA), -EINVAL);
	r.w = 0;
	ck_assert_int_eq(bfs_resize(src, 2, 2, 2, 1, r, out, 2, 2, 2, BFS_FILTER_AREA), -EINVAL);
}
END_TEST

/* ------------------------------------------------ geometry through PNG */

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static size_t chunk(uint8_t *out, const char *type, const uint8_t *data, uint32_t len)
{
	put32(out, len);
	memcpy(out + 4, type, 4);
	if (len)
		memcpy(out + 8, data, len);
	put32(out + 8 + len, (uint32_t)crc32(0, out + 4, len + 4));
	return 12 + (size_t)len;
}

/* An 8-bit RGB PNG of w x h whose pixel (x, y) is col[x] (every row the
 * same). Returns its length; *out is malloc'd. */
static size_t png_of_columns(uint8_t **out, uint32_t w, uint32_t h, const uint8_t (*col)[3])
{
	static const uint8_t sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	size_t rawlen = (size_t)h * (1 + (size_t)w * 3);
	uint8_t *raw = malloc(rawlen), ihdr[13] = { 0 };
	uLongf zlen = compressBound((uLong)rawlen);
	uint8_t *z = malloc(zlen), *p;
	size_t n = 0;

	for (uint32_t y = 0; y < h; y++) {
		uint8_t *r = raw + (size_t)y * (1 + (size_t)w * 3);
		r[0] = 0; /* filter: none */
		for (uint32_t x = 0; x < w; x++)
			memcpy(r + 1 + (size_t)x * 3, col[x], 3);
	}
	ck_assert_int_eq(compress(z, &zlen, raw, (uLong)rawlen), Z_OK);
	put32(ihdr, w);
	put32(ihdr + 4, h);
	ihdr[8] = 8; /* bit depth */
	ihdr[9] = 2; /* RGB */
	p = malloc(8 + 25 + 12 + zlen + 12);
	memcpy(p, sig, 8);
	n = 8;
	n += chunk(p + n, "IHDR", ihdr, 13);
	n += chunk(p + n, "IDAT", z, (uint32_t)zlen);
	n += chunk(p + n, "IEND", NULL, 0);
	free(raw);
	free(z);
	*out = p;
	return n;
}

static const uint8_t COLS[4][3] = {
	{ 10, 20, 30 }, { 40, 50, 60 }, { 70, 80, 90 }, { 200, 210, 220 }
};

static void decode(uint8_t *dst, const uint8_t *png, size_t len, uint32_t h, uint32_t w,
		   enum bfs_resize_mode mode)
{
	struct bfs_image_target t = {
		.h = h, .w = w, .c = 3, .resize = mode, .filter = BFS_FILTER_AREA
	};
	int rc = bfs_image_decode(dst, &t, png, len);

	ck_assert_msg(rc == 0, "decode: %d %s", rc, bfs_err_msg());
}

START_TEST(stretch_maps_each_axis_onto_the_target)
{
	uint8_t *png, out[2 * 2 * 3];
	size_t len = png_of_columns(&png, 4, 2, COLS);

	/* 4x2 -> 2x2: each output column the mean of two source columns */
	decode(out, png, len, 2, 2, BFS_RESIZE_STRETCH);
	for (int y = 0; y < 2; y++)
		for (int k = 0; k < 3; k++) {
			ck_assert_int_eq(out[(y * 2 + 0) * 3 + k], (COLS[0][k] + COLS[1][k]) / 2);
			ck_assert_int_eq(out[(y * 2 + 1) * 3 + k], (COLS[2][k] + COLS[3][k]) / 2);
		}
	free(png);
}
END_TEST

START_TEST(fit_keeps_the_aspect_centred_and_pads_with_zero)
{
	uint8_t *png, out[4 * 4 * 3];
	size_t len = png_of_columns(&png, 4, 2, COLS);

	/* 4x2 into 4x4: scale 1, rows 1-2 the image, rows 0 and 3 zero */
	memset(out, 0x55, sizeof(out));
	decode(out, png, len, 4, 4, BFS_RESIZE_FIT);
	for (int y = 0; y < 4; y++)
		for (int x = 0; x < 4; x++)
			for (int k = 0; k < 3; k++)
				ck_assert_int_eq(out[(y * 4 + x) * 3 + k],
						 y == 0 || y == 3 ? 0 : COLS[x][k]);
	/* 4x2 into h 3, w 2: scale 1/2, a 2x1 block at row 1, rows 0 and 2
	 * zero */
	decode(out, png, len, 3, 2, BFS_RESIZE_FIT);
	for (int k = 0; k < 3; k++) {
		ck_assert_int_eq(out[0 * 3 + k], 0);
		ck_assert_int_eq(out[1 * 3 + k], 0);
		ck_assert_int_eq(out[(2 + 0) * 3 + k], (COLS[0][k] + COLS[1][k]) / 2);
		ck_assert_int_eq(out[(2 + 1) * 3 + k], (COLS[2][k] + COLS[3][k]) / 2);
		ck_assert_int_eq(out[(4 + 0) * 3 + k], 0);
		ck_assert_int_eq(out[(4 + 1) * 3 + k], 0);
	}
	free(png);
}
END_TEST

START_TEST(crop_covers_the_target_and_takes_the_centre)
{
	uint8_t *png, out[2 * 2 * 3];
	size_t len = png_of_columns(&png, 4, 2, COLS);

	/* 4x2 -> 2x2: scale 1 covers the height; the centre columns 1 and 2 */
	decode(out, png, len, 2, 2, BFS_RESIZE_CROP);
	for (int y = 0; y < 2; y++)
		for (int k = 0; k < 3; k++) {
			ck_assert_int_eq(out[(y * 2 + 0) * 3 + k], COLS[1][k]);
			ck_assert_int_eq(out[(y * 2 + 1) * 3 + k], COLS[2][k]);
		}
	/* 4x2 -> 1x1: scale 1/2 covers the height, the centre 2x2 of the
	 * source: columns 1 and 2 */
	decode(out, png, len, 1, 1, BFS_RESIZE_CROP);
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(out[k], (COLS[1][k] + COLS[2][k]) / 2);
	free(png);
}
END_TEST

static Suite *resize_suite(void)
{
	Suite *su = suite_create("resize");
	TCase *tc = tcase_create("resize");

	tcase_add_test(tc, identity_is_exact_for_both_filters_and_every_channel_count);
	tcase_add_test(tc, bilinear_known_rows);
	tcase_add_test(tc, area_known_rows);
	tcase_add_test(tc, two_dimensions_and_channels_are_separable);
	tcase_add_test(tc, one_pixel_source_fills_everything);
	tcase_add_test(tc, strides_are_honoured);
	tcase_add_test(tc, bad_arguments_are_einval);
	tcase_add_test(tc, stretch_maps_each_axis_onto_the_target);
	tcase_add_test(tc, fit_keeps_the_aspect_centred_and_pads_with_zero);
	tcase_add_test(tc, crop_covers_the_target_and_takes_the_centre);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	SRunner *sr = srunner_create(resize_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
