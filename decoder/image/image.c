/* SPDX-License-Identifier: Apache-2.0 */
/*
 * image.c — sniffing, the pixel cap, resize geometry and the choice of the
 * JPEG DCT scale; the decoding itself is jpeg.c's and png.c's, the
 * resampling resize.c's (see image.h).
 */
#include "image.h"

#include "image_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum bfs_image_fmt bfs_image_sniff(const uint8_t *d, size_t len)
{
	static const uint8_t png_sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };

	if (len >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff)
		return BFS_IMAGE_JPEG;
	if (len >= 8 && memcmp(d, png_sig, 8) == 0)
		return BFS_IMAGE_PNG;
	return BFS_IMAGE_UNKNOWN;
}

const char *bfs_image_fmt_name(enum bfs_image_fmt f)
{
	return f == BFS_IMAGE_JPEG ? "jpeg" : f == BFS_IMAGE_PNG ? "png" : "unknown";
}

enum bfs_image_fmt bfs_image_fmt_parse(const char *s)
{
	if (strcmp(s, "jpeg") == 0)
		return BFS_IMAGE_JPEG;
	if (strcmp(s, "png") == 0)
		return BFS_IMAGE_PNG;
	return BFS_IMAGE_UNKNOWN;
}

const char *bfs_resize_name(enum bfs_resize_mode m)
{
	return m == BFS_RESIZE_FIT ? "fit" : m == BFS_RESIZE_CROP ? "crop" : "stretch";
}

int bfs_resize_parse(const char *s, enum bfs_resize_mode *out)
{
	if (strcmp(s, "stretch") == 0)
		*out = BFS_RESIZE_STRETCH;
	else if (strcmp(s, "fit") == 0)
		*out = BFS_RESIZE_FIT;
	else if (strcmp(s, "crop") == 0)
		*out = BFS_RESIZE_CROP;
	else
		return -EINVAL;
	return 0;
}

const char *bfs_filter_name(enum bfs_filter f)
{
	return f == BFS_FILTER_AREA ? "area" : "bilinear";
}

int bfs_filter_parse(const char *s, enum bfs_filter *out)
{
	if (strcmp(s, "bilinear") == 0)
		*out = BFS_FILTER_BILINEAR;
	else if (strcmp(s, "area") == 0)
		*out = BFS_FILTER_AREA;
	else
		return -EINVAL;
	return 0;
}

int bfs_image_probe(const uint8_t *data, size_t len, enum bfs_image_fmt *fmt, uint32_t *w,
		    uint32_t *h)
{
	*fmt = bfs_image_sniff(data, len);
	switch (*fmt) {
	case BFS_IMAGE_JPEG:
		return bfs_jpeg_header(data, len, w, h);
	case BFS_IMAGE_PNG:
		return bfs_png_header(data, len, w, h);
	default:
		if (len == 0)
			return bfs_err_set(-EBADMSG, "empty value (0 bytes), not an image");
		return bfs_err_set(-EBADMSG,
				   "not a JPEG or PNG image (first bytes %02x %02x %02x %02x)",
				   data[0], len > 1 ? data[1] : 0, len > 2 ? data[2] : 0,
				   len > 3 ? data[3] : 0);
	}
}

/* Where the image goes: source region (in original pixels) onto the
 * destination block at (ox, oy) of bw x bh; scale = output pixels per
 * source pixel on the axis that is reduced least. */
struct placement {
	struct bfs_region src;
	uint32_t ox, oy, bw, bh;
	double scale;
};

static uint32_t clamp_dim(double v, uint32_t max)
{
	long r = lround(v);
	if (r < 1)
		return 1;
	return (uint64_t)r > max ? max : (uint32_t)r;
}

static void place(struct placement *p, const struct bfs_image_target *t, uint32_t w, uint32_t h)
{
	double sx = (double)t->w / w, sy = (double)t->h / h, s;

	memset(p, 0, sizeof(*p));
	p->src.w = w;
	p->src.h = h;
	p->bw = t->w;
	p->bh = t->h;
	switch (t->resize) {
	case BFS_RESIZE_STRETCH:
		p->scale = sx > sy ? sx : sy;
		break;
	case BFS_RESIZE_FIT:
		s = sx < sy ? sx : sy;
		p->bw = clamp_dim(w * s, t->w);
		p->bh = clamp_dim(h * s, t->h);
		p->ox = (t->w - p->bw) / 2;
		p->oy = (t->h - p->bh) / 2;
		p->scale = s;
		break;
	case BFS_RESIZE_CROP:
		s = sx > sy ? sx : sy;
		p->src.w = t->w / s;
		p->src.h = t->h / s;
		if (p->src.w > w)
			p->src.w = w;
		if (p->src.h > h)
			p->src.h = h;
		p->src.x = (w - p->src.w) / 2;
		p->src.y = (h - p->src.h) / 2;
		p->scale = s;
		break;
	}
}

unsigned bfs_image_dct_denom(double scale)
{
	for (unsigned d = 8; d >= 2; d /= 2)
		if (scale * d <= 1.0)
			return d;
	return 1;
}

int bfs_image_decode(uint8_t *dst, const struct bfs_image_target *t, const uint8_t *data,
		     size_t len)
{
	uint64_t cap = t->max_pixels ? t->max_pixels : BFS_IMAGE_MAX_PIXELS_DEFAULT;
	enum bfs_image_fmt fmt;
	struct placement p;
	uint32_t w, h, dw, dh;
	uint8_t *pix = NULL;
	size_t stride = (size_t)t->w * t->c;
	unsigned denom = 1;
	int rc;

	if (!t->w || !t->h || (t->c != 1 && t->c != 3 && t->c != 4))
		return bfs_err_set(-EINVAL, "image target %ux%ux%u is not a size", t->h, t->w,
				   t->c);
	rc = bfs_image_probe(data, len, &fmt, &w, &h);
	if (rc)
		return rc;
	if ((uint64_t)w * h > cap)
		return bfs_err_set(
			-EBADMSG,
			"%s image %ux%u has %llu pixels, over the cap image_max_pixels=%llu",
			bfs_image_fmt_name(fmt), w, h, (unsigned long long)((uint64_t)w * h),
			(unsigned long long)cap);
	place(&p, t, w, h);
	if (fmt == BFS_IMAGE_JPEG) {
		denom = bfs_image_dct_denom(p.scale);
		rc = bfs_jpeg_decode(data, len, t->c, denom, cap, &pix, &dw, &dh);
	} else {
		rc = bfs_png_decode(data, len, t->c, cap, &pix, &dw, &dh);
	}
	if (rc)
		return rc;
	if (dw != w || dh != h) { /* DCT-scaled: the region in decoded pixels */
		double fx = (double)dw / w, fy = (double)dh / h;
		p.src.x *= fx;
		p.src.w *= fx;
		p.src.y *= fy;
		p.src.h *= fy;
	}
	if (p.bw != t->w || p.bh != t->h)
		memset(dst, 0, stride * t->h);
	if (p.src.x == 0 && p.src.y == 0 && p.src.w == p.bw && p.src.h == p.bh && dw == p.bw &&
	    dh == p.bh) {
		/* no resampling: the decoded pixels as they are */
		for (uint32_t y = 0; y < dh; y++)
			memcpy(dst + (size_t)(p.oy + y) * stride + (size_t)p.ox * t->c,
			       pix + (size_t)y * dw * t->c, (size_t)dw * t->c);
		rc = 0;
	} else {
		rc = bfs_resize(pix, dw, dh, (size_t)dw * t->c, t->c, p.src,
				dst + (size_t)p.oy * stride + (size_t)p.ox * t->c, p.bw, p.bh,
				stride, t->filter);
		if (rc == -ENOMEM)
			rc = bfs_err_set(-ENOMEM, "image: no memory to resize");
		else if (rc)
			rc = bfs_err_set(-EBADMSG, "image: cannot resize %ux%u to %ux%u", dw, dh,
					 p.bw, p.bh);
	}
	free(pix);
	return rc;
}
