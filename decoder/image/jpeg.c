/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jpeg.c — JPEG through libjpeg-turbo's TurboJPEG API (the only file that
 * includes <turbojpeg.h>). See image_impl.h.
 *
 * A fresh decompressor handle for every image (a few microseconds against
 * the milliseconds of a decode): fuzzing showed a reused handle could make
 * the same bytes decode differently after some earlier input. Any warning (a truncated scan, corrupt data the
 * library would paper over with grey) fails the decode: a record must
 * never turn into an image that is silently wrong.
 */
#include "image_impl.h"

#include <stdlib.h>
#include <string.h>

#include <turbojpeg.h>

/* The error of a handle, as one line. */
static int jpeg_err(tjhandle h)
{
	const char *m = tjGetErrorStr2(h);
	size_t n = m ? strlen(m) : 0;

	/* the library's messages end without a period; keep them one line */
	return bfs_err_set(-EBADMSG, "jpeg: %.*s", (int)(n > 200 ? 200 : n),
			   m ? m : "decode failed");
}

/* libjpeg's headers are in a JPEG of at least a few bytes; TurboJPEG takes
 * lengths as unsigned long. */
static int check_len(size_t len)
{
	if (len < 4)
		return bfs_err_set(-EBADMSG, "jpeg: %zu bytes are too short for a JPEG", len);
	if (len > (size_t)1 << 31)
		return bfs_err_set(-EBADMSG, "jpeg: %zu bytes are too many", len);
	return 0;
}

static int header(tjhandle h, const uint8_t *data, size_t len, int *w, int *hh, int *cs)
{
	int sub = 0;

	if (tjDecompressHeader3(h, data, (unsigned long)len, w, hh, &sub, cs) != 0)
		return jpeg_err(h);
	if (*w <= 0 || *hh <= 0)
		return bfs_err_set(-EBADMSG, "jpeg: header gives a size of %dx%d", *w, *hh);
	return 0;
}

int bfs_jpeg_header(const uint8_t *data, size_t len, uint32_t *w, uint32_t *h)
{
	tjhandle th;
	int iw, ih, cs, rc;

	if ((rc = check_len(len)))
		return rc;
	th = tjInitDecompress();
	if (!th)
		return bfs_err_set(-ENOMEM, "jpeg: cannot create a decompressor");
	rc = header(th, data, len, &iw, &ih, &cs);
	tjDestroy(th);
	if (rc)
		return rc;
	*w = (uint32_t)iw;
	*h = (uint32_t)ih;
	return 0;
}

int bfs_jpeg_decode(const uint8_t *data, size_t len, unsigned c, unsigned denom,
		    uint64_t max_pixels, uint8_t **out, uint32_t *ow, uint32_t *oh)
{
	tjhandle th = NULL;
	tjscalingfactor sf = { 1, (int)denom };
	int iw, ih, cs, sw, sh, pf, rc;
	uint8_t *pix = NULL, *tmp = NULL;
	unsigned dc;

	*out = NULL;
	if (denom != 1 && denom != 2 && denom != 4 && denom != 8)
		return bfs_err_set(-EINVAL, "jpeg: scale 1/%u is not offered", denom);
	if ((rc = check_len(len)))
		return rc;
	th = tjInitDecompress();
	if (!th)
		return bfs_err_set(-ENOMEM, "jpeg: cannot create a decompressor");
	if ((rc = header(th, data, len, &iw, &ih, &cs)))
		goto out;
	if ((uint64_t)iw * (uint64_t)ih > max_pixels) {
		rc = bfs_err_set(-EBADMSG, "jpeg: image %dx%d is over the cap of %llu pixels", iw,
				 ih, (unsigned long long)max_pixels);
		goto out;
	}
	sw = TJSCALED(iw, sf);
	sh = TJSCALED(ih, sf);
	if (sw <= 0 || sh <= 0 || sw > iw || sh > ih) {
		rc = bfs_err_set(-EBADMSG, "jpeg: scaled size %dx%d of %dx%d", sw, sh, iw, ih);
		goto out;
	}
	if (cs == TJCS_CMYK || cs == TJCS_YCCK) {
		pf = TJPF_CMYK;
		dc = 4;
	} else {
		pf = c == 1 ? TJPF_GRAY : c == 4 ? TJPF_RGBA : TJPF_RGB;
		dc = c;
	}
	pix = malloc((size_t)sw * (size_t)sh * dc);
	if (!pix) {
		rc = bfs_err_set(-ENOMEM, "jpeg: no memory for a %dx%d image", sw, sh);
		goto out;
	}
	if (tjDecompress2(th, data, (unsigned long)len, pix, sw, 0, sh, pf, TJFLAG_STOPONWARNING) !=
	    0) {
		rc = jpeg_err(th);
		goto out;
	}
	if (pf == TJPF_CMYK) {
		tmp = malloc((size_t)sw * (size_t)sh * c);
		if (!tmp) {
			rc = bfs_err_set(-ENOMEM, "jpeg: no memory for a %dx%d image", sw, sh);
			goto out;
		}
		bfs_cmyk_to(tmp, pix, (size_t)sw * (size_t)sh, c);
		free(pix);
		pix = tmp;
	}
	*out = pix;
	pix = NULL;
	*ow = (uint32_t)sw;
	*oh = (uint32_t)sh;
	rc = 0;
out:
	free(pix);
	tjDestroy(th);
	return rc;
}
