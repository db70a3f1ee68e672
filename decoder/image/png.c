/* SPDX-License-Identifier: Apache-2.0 */
/*
 * png.c — PNG through libspng (the only file that includes <spng.h>).
 * See image_impl.h.
 *
 * Every PNG variant (1/2/4/8/16-bit, grayscale, palette, alpha, tRNS,
 * interlaced) is expanded by libspng to 8-bit RGB or RGBA; gray output is
 * PIL's luma of that (for a grayscale PNG it is the gray value itself).
 * CRC errors in any chunk, a truncated stream and a bad zlib checksum all
 * fail the decode (libspng's defaults, kept).
 */
#include "image_impl.h"

#include <stdlib.h>
#include <string.h>

#include <spng.h>

static int png_err(int e)
{
	return bfs_err_set(-EBADMSG, "png: %s", spng_strerror(e));
}

/* Width and height from IHDR, which must come first: 8-byte signature,
 * chunk length 13, "IHDR", then big-endian width and height. */
int bfs_png_header(const uint8_t *d, size_t len, uint32_t *w, uint32_t *h)
{
	static const uint8_t sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };

	if (len < 24 || memcmp(d, sig, 8) != 0)
		return bfs_err_set(-EBADMSG, "png: not a PNG header");
	if (memcmp(d + 12, "IHDR", 4) != 0)
		return bfs_err_set(-EBADMSG, "png: first chunk is not IHDR");
	*w = (uint32_t)d[16] << 24 | (uint32_t)d[17] << 16 | (uint32_t)d[18] << 8 | d[19];
	*h = (uint32_t)d[20] << 24 | (uint32_t)d[21] << 16 | (uint32_t)d[22] << 8 | d[23];
	if (!*w || !*h)
		return bfs_err_set(-EBADMSG, "png: header gives a size of %ux%u", *w, *h);
	return 0;
}

int bfs_png_decode(const uint8_t *data, size_t len, unsigned c, uint64_t max_pixels, uint8_t **out,
		   uint32_t *ow, uint32_t *oh)
{
	spng_ctx *ctx = spng_ctx_new(0);
	struct spng_ihdr ihdr;
	int fmt = c == 4 ? SPNG_FMT_RGBA8 : SPNG_FMT_RGB8;
	size_t n = 0, npix;
	uint8_t *pix = NULL;
	int e, rc;

	*out = NULL;
	if (!ctx)
		return bfs_err_set(-ENOMEM, "png: cannot create a decoder");
	if ((e = spng_set_png_buffer(ctx, data, len)) || (e = spng_get_ihdr(ctx, &ihdr)) ||
	    (e = spng_decoded_image_size(ctx, fmt, &n))) {
		rc = png_err(e);
		goto out;
	}
	if ((uint64_t)ihdr.width * ihdr.height > max_pixels) {
		rc = bfs_err_set(-EBADMSG, "png: image %ux%u is over the cap of %llu pixels",
				 ihdr.width, ihdr.height, (unsigned long long)max_pixels);
		goto out;
	}
	pix = malloc(n ? n : 1);
	if (!pix) {
		rc = bfs_err_set(-ENOMEM, "png: no memory for a %ux%u image", ihdr.width,
				 ihdr.height);
		goto out;
	}
	e = spng_decode_image(ctx, pix, n, fmt, c == 4 ? SPNG_DECODE_TRNS : 0);
	/* the chunks after the image data, to IEND: this is also what checks the
	 * last IDAT chunk's CRC, which the image decode stops short of */
	if (!e)
		e = spng_decode_chunks(ctx);
	if (e) {
		rc = png_err(e);
		goto out;
	}
	npix = (size_t)ihdr.width * ihdr.height;
	if (c == 1) /* RGB -> L in place: pixel i is written after it is read */
		for (size_t i = 0; i < npix; i++)
			pix[i] = bfs_luma(pix[i * 3], pix[i * 3 + 1], pix[i * 3 + 2]);
	*out = pix;
	pix = NULL;
	*ow = ihdr.width;
	*oh = ihdr.height;
	rc = 0;
out:
	free(pix);
	spng_ctx_free(ctx);
	return rc;
}
