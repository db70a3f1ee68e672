/* SPDX-License-Identifier: Apache-2.0 */
/*
 * image.h — JPEG/PNG bytes to a fixed-size uint8 [H, W, C] tensor row.
 *
 * The format is sniffed from the bytes (JPEG: FF D8 FF; PNG: its 8-byte
 * signature). JPEG goes through libjpeg-turbo (jpeg.c), PNG through libspng
 * (png.c): one firewall file per library. Pixels come out in RGB(A) order:
 *   C = 3  RGB; alpha dropped; grayscale replicated.
 *   C = 4  RGBA; alpha 255 where the image has none (PNG tRNS applies).
 *   C = 1  luma: the JPEG's own Y channel; for PNG colour, PIL's
 *          L = (19595 R + 38470 G + 7471 B + 32768) >> 16.
 * 16-bit PNG samples keep their high byte (v >> 8, as PIL reads 16-bit
 * RGB). CMYK JPEGs are taken as Adobe-inverted (as PIL, TF and Photoshop
 * do) and turned into RGB with PIL's formula. No gamma or ICC profile is
 * applied.
 *
 * Resize to H x W: STRETCH scales each axis to fit exactly; FIT keeps the
 * aspect ratio inside H x W, centred, padded with 0; CROP keeps the aspect
 * ratio covering H x W and takes the centre. A JPEG whose scale to the
 * target is 1/2 or less is first decoded at 1/2, 1/4 or 1/8 size by the
 * IDCT itself (the smallest of these still at least as large as needed), so
 * the resampler only ever reduces by less than 2.
 *
 * Augmented (crop=, flip=: augment.h): the box is drawn from the header's
 * size, and only the part of the image it needs is decoded (a JPEG's rows
 * above it skipped, its columns cut, at the IDCT scale its reduction
 * allows: jpegpart.c), then resampled onto H x W with PIL's antialiased
 * bilinear filter (torchvision's resize of a PIL image), or area.
 *
 * An image of more than max_pixels (width x height from its header) is
 * refused before anything is allocated for it.
 *
 * Thread-safety: every function may run on many threads at once (the
 * decoders keep one handle per thread).
 */
#ifndef BFS_IMAGE_H
#define BFS_IMAGE_H

#include "augment.h"
#include "common.h"
#include "resize.h"

enum bfs_image_fmt {
	BFS_IMAGE_UNKNOWN = 0,
	BFS_IMAGE_JPEG,
	BFS_IMAGE_PNG,
};

enum bfs_resize_mode {
	BFS_RESIZE_STRETCH = 0,
	BFS_RESIZE_FIT,
	BFS_RESIZE_CROP,
};

/* 64 Mpixels: a 8192 x 8192 photo; its RGBA decode is 256 MiB. */
#define BFS_IMAGE_MAX_PIXELS_DEFAULT ((uint64_t)64 << 20)

struct bfs_image_target {
	uint32_t h, w, c; /* c: 1, 3 or 4 */
	enum bfs_resize_mode resize;
	enum bfs_filter filter;
	uint64_t max_pixels; /* 0: BFS_IMAGE_MAX_PIXELS_DEFAULT */
};

enum bfs_image_fmt bfs_image_sniff(const uint8_t *data, size_t len);
const char *bfs_image_fmt_name(enum bfs_image_fmt f); /* "jpeg", "png", "unknown" */
enum bfs_image_fmt bfs_image_fmt_parse(const char *s); /* UNKNOWN if neither */
const char *bfs_resize_name(enum bfs_resize_mode m);
int bfs_resize_parse(const char *s, enum bfs_resize_mode *out); /* 0 or -EINVAL */
const char *bfs_filter_name(enum bfs_filter f);
int bfs_filter_parse(const char *s, enum bfs_filter *out);

/* Format and size from the header alone. -EBADMSG (message: the reason)
 * when the bytes are not a JPEG/PNG header this code can read. */
int bfs_image_probe(const uint8_t *data, size_t len, enum bfs_image_fmt *fmt, uint32_t *w,
		    uint32_t *h);

/* The JPEG IDCT scale 1/d used for a resize by `scale` (output / source
 * size, the larger of the two axes' for a stretch): the largest d in 8, 4,
 * 2 whose image is still at least as large as the output needs
 * (scale * d <= 1); else 1. */
unsigned bfs_image_dct_denom(double scale);

/* Decode and resize into dst (t->h * t->w * t->c bytes). Errors: -EBADMSG
 * with the decoder's reason in bfs_err_msg() ("jpeg: ...", "png: ...",
 * "empty value", "not a JPEG or PNG image", "image 60000x60000 has ...
 * pixels, over the cap ..."), -ENOMEM. dst may be partly written on error. */
int bfs_image_decode(uint8_t *dst, const struct bfs_image_target *t, const uint8_t *data,
		     size_t len);

/* bfs_image_decode with augmentation a (NULL, or crop none and no flip:
 * the same bytes as bfs_image_decode) for the record k; *box (may be
 * NULL) gets what was done: the box in source pixels and the flip. The
 * same errors. */
int bfs_image_decode_aug(uint8_t *dst, const struct bfs_image_target *t,
			 const struct bfs_augment *a, const struct bfs_aug_key *k,
			 const uint8_t *data, size_t len, struct bfs_aug_box *box);

#endif
