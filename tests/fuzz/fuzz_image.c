/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_image.c — fuzz target for the image path (image.c, jpeg.c, png.c,
 * resize.c, and with crop= jpegpart.c and augment.c): arbitrary bytes
 * decoded into a small target. The first byte picks the target (channels,
 * resize mode, filter, size, and crop=random or center), the rest is the
 * image; a second decode of the same bytes must fail or succeed alike and
 * give the same pixels (a decoder handle left in a bad state by one image
 * must not change the next). The augmented decode (a box drawn from the
 * input's length, flipped or not) must also be repeatable, its box inside
 * the image, and it must fail exactly where the whole decode fails: a
 * record's validity never depends on the box an epoch draws.
 *
 * bfs_fuzz_image() is called by fuzz_replay.c (plain main, every make check)
 * and, built with -DBFS_LIBFUZZER, by libFuzzer's LLVMFuzzerTestOneInput.
 */
#include "image.h"

#include <stdlib.h>
#include <string.h>

int bfs_fuzz_image(const uint8_t *data, size_t size);

/* crop= on the same bytes: twice alike, inside the image, failing where
 * the whole decode (rc) fails */
static void augmented(const struct bfs_image_target *t, enum bfs_crop crop, const uint8_t *data,
		      size_t size, int rc, uint8_t *a, uint8_t *b)
{
	struct bfs_augment aug;
	struct bfs_aug_key k = { size, size >> 3, size * 7 };
	struct bfs_aug_box x, y;
	enum bfs_image_fmt fmt;
	size_t n = (size_t)t->h * t->w * t->c;
	uint32_t w, h;
	int r1, r2;

	bfs_augment_init(&aug);
	aug.crop = crop;
	aug.flip = true;
	aug.resize = 40; /* at least the largest side (33) */
	r1 = bfs_image_decode_aug(a, t, &aug, &k, data, size, &x);
	r2 = bfs_image_decode_aug(b, t, &aug, &k, data, size, &y);
	if (r1 != r2 || (r1 == 0 && (memcmp(a, b, n) != 0 || memcmp(&x, &y, sizeof(x)) != 0)))
		abort();
	if (r1 == -ENOMEM || rc == -ENOMEM)
		return;
	if ((r1 == 0) != (rc == 0))
		abort();
	if (r1 == 0 && (bfs_image_probe(data, size, &fmt, &w, &h) != 0 || x.w < 1 || x.h < 1 ||
			x.x + x.w > w || x.y + x.h > h))
		abort();
}

int bfs_fuzz_image(const uint8_t *data, size_t size)
{
	enum bfs_crop crop;

	static const uint32_t sides[4] = { 1, 7, 16, 33 };
	struct bfs_image_target t;
	enum bfs_image_fmt fmt;
	uint32_t w, h;
	uint8_t *a, *b;
	size_t n;
	int r1, r2;

	if (size < 1)
		return 0;
	t.c = (data[0] & 3) == 0 ? 1 : (data[0] & 3) == 1 ? 3 : 4;
	t.resize = (enum bfs_resize_mode)((data[0] >> 2) % 3);
	t.filter = (data[0] >> 4) & 1 ? BFS_FILTER_AREA : BFS_FILTER_BILINEAR;
	t.h = sides[(data[0] >> 5) & 3];
	t.w = sides[((data[0] >> 5) + 1) & 3];
	t.max_pixels = (uint64_t)1 << 22; /* keeps each run small */
	crop = data[0] >> 7 ? BFS_CROP_CENTER : BFS_CROP_RANDOM;
	data++;
	size--;
	(void)bfs_image_probe(data, size, &fmt, &w, &h);
	n = (size_t)t.h * t.w * t.c;
	a = malloc(n);
	b = malloc(n);
	if (!a || !b)
		abort();
	r1 = bfs_image_decode(a, &t, data, size);
	r2 = bfs_image_decode(b, &t, data, size);
	if (r1 != r2 || (r1 == 0 && memcmp(a, b, n) != 0))
		abort();
	augmented(&t, crop, data, size, r1, a, b);
	free(a);
	free(b);
	return 0;
}

#ifdef BFS_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return bfs_fuzz_image(data, size);
}
#endif
