/* SPDX-License-Identifier: Apache-2.0 */
/*
 * augment.h — training-time augmentation of an image feature: which part
 * of the source image becomes the H x W output (the box) and whether it
 * is mirrored, for crop=random|center|none and flip=h|none
 * (docs/augment.md, whose Python is the rule this code follows).
 *
 * A box and a flip are a function of (seed, epoch, record, the image's
 * width and height) and the feature's options only: no state, no order of
 * calls, no thread. Every draw is mix() of a counter-based key, as the
 * epoch orders are (docs/shuffle.md, section 2), so any record's box in
 * any epoch is computed alone. The geometry needs only the image's size
 * from its header, so a decoder elsewhere (a GPU's, given the same boxes)
 * can follow it without this file's decoding.
 *
 *   crop=random  torchvision's RandomResizedCrop: an area fraction drawn
 *                uniformly from scale[0..1], an aspect ratio drawn
 *                log-uniformly from ratio[0..1], ten tries for a box that
 *                fits, else the central crop of the clamped ratio; the box
 *                is resized to H x W (the resampler stays inside it).
 *   crop=center  torchvision's Resize(resize) + CenterCrop((H, W)): the
 *                shorter side scaled to `resize`, the central H x W taken;
 *                the region is fractional in source pixels and the
 *                resampler may reach the image's pixels around it, as a
 *                resize of the whole image would.
 *   crop=none    the feature's own resize (stretch, fit, crop).
 *   flip=h       half the outputs mirrored left to right, after the resize.
 *
 * Does not: decode or resample (image.c, resize.c). Thread-safety: pure
 * functions.
 */
#ifndef BFS_AUGMENT_H
#define BFS_AUGMENT_H

#include "resize.h"

#include <stdbool.h>
#include <stdint.h>

enum bfs_crop {
	BFS_CROP_NONE = 0,
	BFS_CROP_RANDOM,
	BFS_CROP_CENTER,
};

/* One image feature's augmentation. The defaults (bfs_augment_init):
 * none, no flip, scale 0.08..1, ratio 3/4..4/3, resize 0 (for H x W:
 * round(max(H, W) * 256 / 224)). */
struct bfs_augment {
	enum bfs_crop crop;
	bool flip;
	double scale[2]; /* random: area fraction, 0 < scale[0] <= scale[1] <= 1 */
	double ratio[2]; /* random: width / height, 0 < ratio[0] <= ratio[1] */
	uint32_t resize; /* center: the shorter side before the crop; 0: the default */
};

void bfs_augment_init(struct bfs_augment *a);
/* Which fields of a struct bfs_augment a mount option gives (the others
 * stay each feature's own): bfs_schema_set_augment's mask. */
#define BFS_AUG_SET_CROP 1u
#define BFS_AUG_SET_FLIP 2u
#define BFS_AUG_SET_SCALE 4u
#define BFS_AUG_SET_RATIO 8u
#define BFS_AUG_SET_RESIZE 16u

/* Anything to do: a crop other than none, or a flip. */
static inline bool bfs_augment_on(const struct bfs_augment *a)
{
	return a && (a->crop != BFS_CROP_NONE || a->flip);
}

const char *bfs_crop_name(enum bfs_crop c); /* "random", "center", "none" */
int bfs_crop_parse(const char *s, enum bfs_crop *out); /* 0 or -EINVAL */
/* "A:B" with A and B numbers or fractions ("0.08:1", "3/4:4/3"): 0, or
 * -EINVAL. */
int bfs_augment_range_parse(const char *s, double out[2]);
/* The shorter side crop=center resizes to for an H x W output. */
uint32_t bfs_augment_resize(const struct bfs_augment *a, uint32_t H, uint32_t W);
/* Whether a's values are usable for an H x W output: 0, or -EINVAL with
 * the reason in bfs_err_msg() ("crop_scale must be ...", "crop_resize 200
 * is less than the output's 224"). */
int bfs_augment_check(const struct bfs_augment *a, uint32_t H, uint32_t W);

/* The record a box belongs to. */
struct bfs_aug_key {
	uint64_t seed, epoch, record;
};

/* One image's augmentation: what is recorded (box, flip) and what is
 * resampled (src, clip). */
struct bfs_aug_box {
	/* the box in the source image's pixels (FEATURE.crop: x, y, w, h):
	 * random's exactly; center's rounded to whole pixels; none's, the
	 * resize's region rounded */
	uint32_t x, y, w, h;
	bool flip;
	/* the region of the source mapped onto H x W (fractional) */
	struct bfs_region src;
	/* true: the resampler reads only pixels inside the box (a crop, then
	 * a resize); false: any pixel of the image (a resize, then a crop) */
	bool clip;
};

/* The box and flip of crop=random or crop=center (a->crop not NONE) for a
 * w x h image and an H x W output, keyed by k. */
void bfs_augment_box(const struct bfs_augment *a, const struct bfs_aug_key *k, uint32_t w,
		     uint32_t h, uint32_t H, uint32_t W, struct bfs_aug_box *out);
/* Only the flip (crop=none with flip=h). */
bool bfs_augment_flip(const struct bfs_augment *a, const struct bfs_aug_key *k);

#endif
