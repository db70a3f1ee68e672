/* SPDX-License-Identifier: Apache-2.0 */
/*
 * image_impl.h — between image.c and its decoders (jpeg.c, jpegpart.c,
 * png.c).
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

/* A rectangle of an image, in its pixels. */
struct bfs_rect {
	uint32_t x, y, w, h;
};

/* Part of a JPEG (jpegpart.c, through libjpeg's API): the part `want` of
 * the image scaled by 1/denom (denom 1, 2, 4 or 8; want in the scaled
 * image's pixels, inside it). *out holds got->w x got->h pixels of c
 * channels (rows got->w * c bytes apart): the scaled image's part `got`,
 * which contains want (whole rows from an iMCU boundary may make it
 * wider). *sw x *sh: the scaled image's size. The pixels are those of
 * bfs_jpeg_decode at that scale, and an image fails where that one
 * fails, whatever part is asked for. -EINVAL: want is not inside the
 * scaled image. */
int bfs_jpeg_decode_part(const uint8_t *data, size_t len, unsigned c, unsigned denom,
			 uint64_t max_pixels, struct bfs_rect want, uint8_t **out,
			 struct bfs_rect *got, uint32_t *sw, uint32_t *sh);

int bfs_png_header(const uint8_t *data, size_t len, uint32_t *w, uint32_t *h);
int bfs_png_decode(const uint8_t *data, size_t len, unsigned c, uint64_t max_pixels, uint8_t **out,
		   uint32_t *w, uint32_t *h);

/* PIL's RGB -> L (ITU-R 601-2 luma, 16-bit fixed point). */
static inline uint8_t bfs_luma(unsigned r, unsigned g, unsigned b)
{
	return (uint8_t)((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

/* PIL's (a * b) / 255, rounded: MULDIV255. */
static inline unsigned bfs_muldiv255(unsigned a, unsigned b)
{
	unsigned t = a * b + 128;
	return ((t >> 8) + t) >> 8;
}

/* Adobe-inverted CMYK (as stored, 4 bytes a pixel) to c channels, the
 * way PIL converts it: its CMYK is 255 - stored, R = (255 - K) - C *
 * (255 - K) / 255, and C = 1 its luma. dst may be src (a pixel is read
 * before it is written). Here, inline, for both JPEG decoders (jpeg.c,
 * jpegpart.c), which image.c calls. */
static inline void bfs_cmyk_to(uint8_t *dst, const uint8_t *src, size_t npix, unsigned c)
{
	for (size_t i = 0; i < npix; i++) {
		const uint8_t *s = src + i * 4;
		unsigned nk = s[3], rgb[3];

		for (int k = 0; k < 3; k++) {
			int v = (int)nk - (int)bfs_muldiv255(255u - s[k], nk);
			rgb[k] = v < 0 ? 0 : (unsigned)v;
		}
		if (c == 1) {
			dst[i] = bfs_luma(rgb[0], rgb[1], rgb[2]);
		} else {
			uint8_t *d = dst + i * c;
			d[0] = (uint8_t)rgb[0];
			d[1] = (uint8_t)rgb[1];
			d[2] = (uint8_t)rgb[2];
			if (c == 4)
				d[3] = 255;
		}
	}
}

#endif
