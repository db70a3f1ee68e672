/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resize.h — separable resampling of 8-bit interleaved images.
 *
 * A region of the source (a rectangle in source pixel coordinates, edges
 * may be fractional: pixel x covers [x, x+1)) is mapped onto a dw x dh
 * block of the destination. Two filters:
 *   BILINEAR  each output sample is the bilinear interpolation of the 2x2
 *             source pixels around its centre (half-pixel centres, edges
 *             clamped), as OpenCV INTER_LINEAR or TF's resize(bilinear,
 *             half_pixel_centers) compute it. No antialiasing: pair it with
 *             the JPEG decoder's DCT scaling for large reductions.
 *   AREA      each output pixel is the mean of the source area it covers,
 *             fractional pixels weighted by their overlap (PIL's BOX
 *             filter, OpenCV INTER_AREA when reducing).
 *   BILINEAR_AA  PIL's BILINEAR, which torchvision's resize (antialias)
 *             is on PIL images: a triangle of support 1 widened by the
 *             reduction (support = max(scale, 1) source pixels around the
 *             output pixel's centre), weights normalized over the pixels
 *             inside the source; enlarging, it is BILINEAR.
 * Rounding: to nearest, clamped to 0..255.
 *
 * Does not: allocate more than two rows of weights and one float plane of
 * dw x (source rows used) samples; know image formats.
 * Thread-safety: no shared state.
 */
#ifndef BFS_RESIZE_H
#define BFS_RESIZE_H

#include <stddef.h>
#include <stdint.h>

enum bfs_filter {
	BFS_FILTER_BILINEAR = 0,
	BFS_FILTER_AREA,
	BFS_FILTER_BILINEAR_AA,
};

/* Source region: x, y, w, h in source pixels (w, h > 0, inside the image). */
struct bfs_region {
	double x, y, w, h;
};

/* Resample region r of src (sw x sh x c, rows sstride bytes apart) into dst
 * (dw x dh x c, rows dstride bytes apart). 0, or -ENOMEM / -EINVAL. */
int bfs_resize(const uint8_t *src, uint32_t sw, uint32_t sh, size_t sstride, unsigned c,
	       struct bfs_region r, uint8_t *dst, uint32_t dw, uint32_t dh, size_t dstride,
	       enum bfs_filter filter);

#endif
