/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jpegpart.c — part of a JPEG, through libjpeg-turbo's libjpeg API (the
 * only file that includes <jpeglib.h>; jpeg.c is the TurboJPEG API's).
 * See image_impl.h.
 *
 * TurboJPEG 2.1 cannot decode part of an image; libjpeg can: the rows
 * above the part are skipped (jpeg_skip_scanlines: entropy decoding
 * only, no IDCT, upsampling or colour conversion), each row is cut to
 * the part's columns (jpeg_crop_scanline, from an iMCU boundary), and the
 * IDCT may scale by 1/2, 1/4 or 1/8. Both APIs are the same library
 * underneath, with the same settings (accurate integer IDCT, fancy
 * upsampling), so the part holds the pixels a whole decode has there:
 * one pixel more than asked is decoded on each side, since fancy
 * upsampling treats the edges of a cut row as the image's own.
 *
 * Corrupt data is judged as jpeg.c judges it: any warning fails (a
 * truncated scan, bytes the library would paper over with grey), and the
 * rows below the part are entropy-decoded too (skipped, but read) up to
 * the end of the image, so that whether a record decodes never depends
 * on the part asked for. A fresh decompressor for every image, as jpeg.c.
 */
#include "image_impl.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

struct err_mgr {
	struct jpeg_error_mgr pub;
	jmp_buf jmp;
	char msg[JMSG_LENGTH_MAX];
};

static void on_error(j_common_ptr ci)
{
	struct err_mgr *e = (struct err_mgr *)ci->err;

	(*ci->err->format_message)(ci, e->msg);
	longjmp(e->jmp, 1);
}

/* level < 0: a warning, which fails the decode; else trace output, none */
static void on_message(j_common_ptr ci, int level)
{
	if (level < 0)
		on_error(ci);
}

/* The output colour space for c channels (CMYK stays CMYK: converted
 * after, the way PIL converts it); its bytes per pixel in *dc. */
static J_COLOR_SPACE out_space(const struct jpeg_decompress_struct *ci, unsigned c, unsigned *dc)
{
	if (ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK) {
		*dc = 4;
		return JCS_CMYK;
	}
	*dc = c;
	return c == 1 ? JCS_GRAYSCALE : c == 4 ? JCS_EXT_RGBA : JCS_RGB;
}

/* The columns to decode for `want`: one more on each side (fancy
 * upsampling's edges), from the iMCU boundary at or before. */
static void crop_columns(struct jpeg_decompress_struct *ci, const struct bfs_rect *want,
			 JDIMENSION *x0, JDIMENSION *cw)
{
	JDIMENSION a = want->x > 0 ? want->x - 1 : 0;
	JDIMENSION b =
		want->x + want->w + 1 < ci->output_width ? want->x + want->w + 1 : ci->output_width;

	*x0 = a;
	*cw = b - a;
	if (*cw < ci->output_width)
		jpeg_crop_scanline(ci, x0, cw);
	else
		*x0 = 0;
}

/* Rows [y, y + n) of the cropped scan into buf (rows `row` bytes apart);
 * the rows after them are entropy-decoded and dropped, one (the last)
 * read in full into `spare`, so that the whole scan is checked. */
static void read_rows(struct jpeg_decompress_struct *ci, uint32_t y, uint32_t n, uint8_t *buf,
		      size_t row, uint8_t *spare)
{
	uint32_t rest;

	if (y > 0)
		jpeg_skip_scanlines(ci, y);
	for (uint32_t k = 0; k < n;) {
		JSAMPROW rows[16];
		JDIMENSION m = n - k < 16 ? n - k : 16;

		for (JDIMENSION i = 0; i < m; i++)
			rows[i] = buf + (size_t)(k + i) * row;
		k += jpeg_read_scanlines(ci, rows, m);
	}
	rest = ci->output_height - ci->output_scanline;
	if (rest > 1)
		jpeg_skip_scanlines(ci, rest - 1);
	while (ci->output_scanline < ci->output_height) {
		JSAMPROW r = spare;
		jpeg_read_scanlines(ci, &r, 1);
	}
}

int bfs_jpeg_decode_part(const uint8_t *data, size_t len, unsigned c, unsigned denom,
			 uint64_t max_pixels, struct bfs_rect want, uint8_t **out,
			 struct bfs_rect *got, uint32_t *sw, uint32_t *sh)
{
	struct jpeg_decompress_struct ci;
	struct err_mgr em;
	uint8_t *volatile buf = NULL, *volatile spare = NULL, *pix;
	volatile int rc = 0;
	JDIMENSION x0 = 0, cw = 0;
	unsigned dc = c;
	size_t row;

	*out = NULL;
	if (denom != 1 && denom != 2 && denom != 4 && denom != 8)
		return bfs_err_set(-EINVAL, "jpeg: scale 1/%u is not offered", denom);
	if (len < 4 || len > (size_t)1 << 31)
		return bfs_err_set(-EBADMSG, "jpeg: %zu bytes are not a JPEG's length", len);
	memset(&ci, 0, sizeof(ci));
	ci.err = jpeg_std_error(&em.pub);
	em.pub.error_exit = on_error;
	em.pub.emit_message = on_message;
	if (setjmp(em.jmp)) {
		size_t n = strlen(em.msg);

		rc = bfs_err_set(-EBADMSG, "jpeg: %.*s", (int)(n > 200 ? 200 : n), em.msg);
		goto out;
	}
	jpeg_create_decompress(&ci);
	jpeg_mem_src(&ci, data, (unsigned long)len);
	jpeg_read_header(&ci, TRUE);
	if ((uint64_t)ci.image_width * ci.image_height > max_pixels) {
		rc = bfs_err_set(-EBADMSG, "jpeg: image %ux%u is over the cap of %llu pixels",
				 ci.image_width, ci.image_height, (unsigned long long)max_pixels);
		goto out;
	}
	ci.out_color_space = out_space(&ci, c, &dc);
	ci.scale_num = 1;
	ci.scale_denom = denom;
	ci.dct_method = JDCT_ISLOW;
	ci.do_fancy_upsampling = TRUE;
	jpeg_start_decompress(&ci);
	if (ci.output_components != (int)dc || !ci.output_width || !ci.output_height ||
	    want.w == 0 || want.h == 0 || want.x >= ci.output_width ||
	    want.w > ci.output_width - want.x || want.y >= ci.output_height ||
	    want.h > ci.output_height - want.y) {
		rc = bfs_err_set(-EINVAL, "jpeg: part %ux%u at %u,%u of a %ux%u image", want.w,
				 want.h, want.x, want.y, ci.output_width, ci.output_height);
		goto out;
	}
	*sw = ci.output_width;
	*sh = ci.output_height;
	crop_columns(&ci, &want, &x0, &cw);
	row = (size_t)cw * dc;
	buf = malloc(row * want.h);
	spare = malloc(row);
	if (!buf || !spare) {
		rc = bfs_err_set(-ENOMEM, "jpeg: no memory for a %ux%u part", cw, want.h);
		goto out;
	}
	read_rows(&ci, want.y, want.h, buf, row, spare);
	jpeg_finish_decompress(&ci);
	pix = buf;
	if (ci.out_color_space == JCS_CMYK) /* in place: a pixel is read before it is written */
		bfs_cmyk_to(pix, pix, (size_t)cw * want.h, c);
	buf = NULL;
	*out = pix;
	got->x = x0;
	got->y = want.y;
	got->w = cw;
	got->h = want.h;
out:
	free(buf);
	free(spare);
	jpeg_destroy_decompress(&ci);
	return rc;
}
