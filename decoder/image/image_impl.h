/* SPDX-License-Identifier: Apache-2.0 */
/*
 * image_impl.h — between image.c and its two decoders (jpeg.c, png.c).
 *
 * A decoder returns a malloc'd interleaved 8-bit image of `c` channels
 * (1, 3 or 4, see image.h for the conversions), rows w*c bytes apart.
 * Errors: -EBADMSG with "jpeg: REASON" / "png: REASON" in bfs_err_msg(),
 * -ENOMEM.
 */
#ifndef BFS_IMAGE_IMPL_H
#define BFS_IMAGE_IMPL_H

#include "common.h"

int bfs_jpeg_header(const uint8_t *data, size_t len, uint32_t *w, uint32_t *h);
/* Decode at 1/denom size (denom 1, 2, 4 or 8); *w, *h get the decoded size.
 * The decoders check the size their library reads against max_pixels
 * themselves: a file may hold more than one header, and the one the caller
 * probed need not be the one the library decodes. */
int bfs_jpeg_decode(const uint8_t *data, size_t len, unsigned c, unsigned denom,
		    uint64_t max_pixels, uint8_t **out, uint32_t *w, uint32_t *h);

int bfs_png_header(const uint8_t *data, size_t len, uint32_t *w, uint32_t *h);
int bfs_png_decode(const uint8_t *data, size_t len, unsigned c, uint64_t max_pixels, uint8_t **out,
		   uint32_t *w, uint32_t *h);

/* PIL's RGB -> L (ITU-R 601-2 luma, 16-bit fixed point). */
static inline uint8_t bfs_luma(unsigned r, unsigned g, unsigned b)
{
	return (uint8_t)((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

#endif
