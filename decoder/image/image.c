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

/* The header's format and size, checked against the pixel cap. */
static int probe_capped(const struct bfs_image_target *t, const uint8_t *data, size_t len,
			enum bfs_image_fmt *fmt, uint32_t *w, uint32_t *h)
{
	uint64_t cap = t->max_pixels ? t->max_pixels : BFS_IMAGE_MAX_PIXELS_DEFAULT;
	int rc;

	if (!t->w || !t->h || (t->c != 1 && t->c != 3 && t->c != 4))
		return bfs_err_set(-EINVAL, "image target %ux%ux%u is not a size", t->h, t->w,
				   t->c);
	rc = bfs_image_probe(data, len, fmt, w, h);
	if (rc)
		return rc;
	if ((uint64_t)*w * *h > cap)
		return bfs_err_set(
			-EBADMSG,
			"%s image %ux%u has %llu pixels, over the cap image_max_pixels=%llu",
			bfs_image_fmt_name(*fmt), *w, *h, (unsigned long long)((uint64_t)*w * *h),
			(unsigned long long)cap);
	return 0;
}

static int resize_err(int rc, uint32_t sw, uint32_t sh, uint32_t dw, uint32_t dh)
{
	if (rc == -ENOMEM)
		return bfs_err_set(-ENOMEM, "image: no memory to resize");
	return bfs_err_set(-EBADMSG, "image: cannot resize %ux%u to %ux%u", sw, sh, dw, dh);
}

/* The whole image decoded and placed per t->resize; p gets the placement
 * (in the source's pixels). */
static int decode_placed(uint8_t *dst, const struct bfs_image_target *t, const uint8_t *data,
			 size_t len, struct placement *p)
{
	uint64_t cap = t->max_pixels ? t->max_pixels : BFS_IMAGE_MAX_PIXELS_DEFAULT;
	enum bfs_image_fmt fmt;
	uint32_t w, h, dw, dh;
	uint8_t *pix = NULL;
	size_t stride = (size_t)t->w * t->c;
	unsigned denom = 1;
	struct bfs_region src;
	int rc;

	rc = probe_capped(t, data, len, &fmt, &w, &h);
	if (rc)
		return rc;
	place(p, t, w, h);
	if (fmt == BFS_IMAGE_JPEG) {
		denom = bfs_image_dct_denom(p->scale);
		rc = bfs_jpeg_decode(data, len, t->c, denom, cap, &pix, &dw, &dh);
	} else {
		rc = bfs_png_decode(data, len, t->c, cap, &pix, &dw, &dh);
	}
	if (rc)
		return rc;
	src = p->src;
	if (dw != w || dh != h) { /* DCT-scaled: the region in decoded pixels */
		double fx = (double)dw / w, fy = (double)dh / h;
		src.x *= fx;
		src.w *= fx;
		src.y *= fy;
		src.h *= fy;
	}
	if (p->bw != t->w || p->bh != t->h)
		memset(dst, 0, stride * t->h);
	if (src.x == 0 && src.y == 0 && src.w == p->bw && src.h == p->bh && dw == p->bw &&
	    dh == p->bh) {
		/* no resampling: the decoded pixels as they are */
		for (uint32_t y = 0; y < dh; y++)
			memcpy(dst + (size_t)(p->oy + y) * stride + (size_t)p->ox * t->c,
			       pix + (size_t)y * dw * t->c, (size_t)dw * t->c);
		rc = 0;
	} else {
		rc = bfs_resize(pix, dw, dh, (size_t)dw * t->c, t->c, src,
				dst + (size_t)p->oy * stride + (size_t)p->ox * t->c, p->bw, p->bh,
				stride, t->filter);
		if (rc)
			rc = resize_err(rc, dw, dh, p->bw, p->bh);
	}
	free(pix);
	return rc;
}

int bfs_image_decode(uint8_t *dst, const struct bfs_image_target *t, const uint8_t *data,
		     size_t len)
{
	struct placement p;

	return decode_placed(dst, t, data, len, &p);
}

/* ---- crop= and flip= ----------------------------------------------------------------- */

/* floor(v) and ceil(v) clamped to [0, n] */
static uint32_t floor_in(double v, uint32_t n)
{
	v = floor(v);
	return v <= 0 ? 0 : v >= n ? n : (uint32_t)v;
}

static uint32_t ceil_in(double v, uint32_t n)
{
	v = ceil(v);
	return v <= 0 ? 0 : v >= n ? n : (uint32_t)v;
}

/* The pixels of the (1/d-scaled, sw x sh) image the resampler reads for
 * box b onto an H x W output: the box's own (a crop, then a resize), or
 * the region with the filter's reach around it, within the image (a
 * resize, then a crop). */
static struct bfs_rect needed(const struct bfs_aug_box *b, unsigned d, uint32_t sw, uint32_t sh,
			      uint32_t H, uint32_t W)
{
	double x = b->src.x / d, y = b->src.y / d, w = b->src.w / d, h = b->src.h / d;
	double mx = 0, my = 0;
	struct bfs_rect r;
	uint32_t x1, y1;

	if (!b->clip) { /* the triangle's support, and a pixel for rounding */
		mx = (w / W > 1 ? w / W : 1) + 1;
		my = (h / H > 1 ? h / H : 1) + 1;
	}
	r.x = floor_in(x - mx, sw);
	r.y = floor_in(y - my, sh);
	x1 = ceil_in(x + w + mx, sw);
	y1 = ceil_in(y + h + my, sh);
	if (r.x >= sw)
		r.x = sw - 1;
	if (r.y >= sh)
		r.y = sh - 1;
	r.w = x1 > r.x ? x1 - r.x : 1;
	r.h = y1 > r.y ? y1 - r.y : 1;
	return r;
}

/* Decode the part of the image that box b needs, at the DCT scale its
 * reduction allows, and resample it onto dst (t->h x t->w). */
static int decode_box(uint8_t *dst, const struct bfs_image_target *t, enum bfs_image_fmt fmt,
		      const uint8_t *data, size_t len, uint32_t w, uint32_t h,
		      const struct bfs_aug_box *b)
{
	uint64_t cap = t->max_pixels ? t->max_pixels : BFS_IMAGE_MAX_PIXELS_DEFAULT;
	double sx = t->w / b->src.w, sy = t->h / b->src.h;
	unsigned d = fmt == BFS_IMAGE_JPEG ? bfs_image_dct_denom(sx > sy ? sx : sy) : 1;
	uint32_t sw = (w + d - 1) / d, sh = (h + d - 1) / d, pw, ph;
	struct bfs_rect need = needed(b, d, sw, sh, t->h, t->w), got;
	struct bfs_region src;
	uint8_t *pix = NULL;
	const uint8_t *part;
	int rc;

	if (fmt == BFS_IMAGE_JPEG) {
		rc = bfs_jpeg_decode_part(data, len, t->c, d, cap, need, &pix, &got, &pw, &ph);
	} else {
		rc = bfs_png_decode(data, len, t->c, cap, &pix, &pw, &ph);
		got = (struct bfs_rect){ 0, 0, pw, ph };
	}
	if (rc)
		return rc;
	if (pw != sw || ph != sh || need.x < got.x || need.y < got.y ||
	    need.x + need.w > got.x + got.w || need.y + need.h > got.y + got.h) {
		free(pix);
		return bfs_err_set(-EBADMSG,
				   "%s: the image decoded at 1/%u is %ux%u, its header says %ux%u",
				   bfs_image_fmt_name(fmt), d, pw, ph, w, h);
	}
	part = pix + ((size_t)(need.y - got.y) * got.w + (need.x - got.x)) * t->c;
	src.x = b->src.x / d - need.x;
	src.y = b->src.y / d - need.y;
	src.w = b->src.w / d;
	src.h = b->src.h / d;
	rc = bfs_resize(part, need.w, need.h, (size_t)got.w * t->c, t->c, src, dst, t->w, t->h,
			(size_t)t->w * t->c,
			t->filter == BFS_FILTER_AREA ? BFS_FILTER_AREA : BFS_FILTER_BILINEAR_AA);
	if (rc)
		rc = resize_err(rc, need.w, need.h, t->w, t->h);
	free(pix);
	return rc;
}

/* Each row of an h x w image of c channels mirrored left to right. */
static void mirror(uint8_t *img, uint32_t w, uint32_t h, unsigned c)
{
	for (uint32_t y = 0; y < h; y++) {
		uint8_t *row = img + (size_t)y * w * c;

		for (uint32_t a = 0, z = w - 1; a < z; a++, z--)
			for (unsigned k = 0; k < c; k++) {
				uint8_t v = row[(size_t)a * c + k];
				row[(size_t)a * c + k] = row[(size_t)z * c + k];
				row[(size_t)z * c + k] = v;
			}
	}
}

/* crop=none: the resize's region, rounded to whole pixels */
static void placed_box(const struct placement *p, struct bfs_aug_box *b)
{
	b->x = (uint32_t)lround(p->src.x);
	b->y = (uint32_t)lround(p->src.y);
	b->w = (uint32_t)lround(p->src.w);
	b->h = (uint32_t)lround(p->src.h);
	b->src = p->src;
}

int bfs_image_decode_aug(uint8_t *dst, const struct bfs_image_target *t,
			 const struct bfs_augment *a, const struct bfs_aug_key *k,
			 const uint8_t *data, size_t len, struct bfs_aug_box *box)
{
	struct bfs_aug_box b = { 0 };
	enum bfs_image_fmt fmt;
	uint32_t w, h;
	int rc;

	if (!a || a->crop == BFS_CROP_NONE) {
		struct placement p;

		rc = decode_placed(dst, t, data, len, &p);
		if (rc)
			return rc;
		placed_box(&p, &b);
		b.flip = a && bfs_augment_flip(a, k);
	} else {
		rc = probe_capped(t, data, len, &fmt, &w, &h);
		if (rc)
			return rc;
		bfs_augment_box(a, k, w, h, t->h, t->w, &b);
		rc = decode_box(dst, t, fmt, data, len, w, h, &b);
		if (rc)
			return rc;
	}
	if (b.flip)
		mirror(dst, t->w, t->h, t->c);
	if (box)
		*box = b;
	return 0;
}
