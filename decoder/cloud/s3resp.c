/* SPDX-License-Identifier: Apache-2.0 */
/* s3resp.c — one HTTP response of the object-store client: its headers and
 * body as they arrive, and the verdict (done, try again, failed) with the
 * reason. No curl and no I/O: s3.c feeds it, the fuzzer too. */
#include "s3_impl.h"
#include "s3xml.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void bfs_s3resp_reset(struct bfs_s3resp *r)
{
	r->status = 0;
	r->got = 0;
	r->body.n = 0;
	if (r->body.p)
		r->body.p[0] = '\0';
	r->body.err = 0;
	r->body.max = r->kind == BFS_S3RESP_LIST ? BFS_S3RESP_LISTBODY : 0;
	r->etag[0] = '\0';
	r->have_crange = r->have_total = r->have_clen = r->overflow = false;
	r->cr_first = r->cr_last = r->cr_total = r->clen = 0;
	r->bucket_region[0] = '\0';
	r->retry_after_s = 0;
	r->object_size = 0;
}

static bool parse_u64_prefix(const char **p, uint64_t *out)
{
	uint64_t v = 0;
	const char *s = *p;

	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++)
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v))
			return false;
	*p = s;
	*out = v;
	return true;
}

/* "bytes A-B/T" (T may be '*'). */
static void parse_content_range(struct bfs_s3resp *r, const char *v)
{
	const char *p = v;

	if (strncasecmp(p, "bytes ", 6) != 0)
		return;
	p += 6;
	if (!parse_u64_prefix(&p, &r->cr_first) || *p++ != '-' ||
	    !parse_u64_prefix(&p, &r->cr_last) || *p++ != '/' || r->cr_last < r->cr_first)
		return;
	r->have_total =
		parse_u64_prefix(&p, &r->cr_total) && *p == '\0' && r->cr_total > r->cr_last;
	r->have_crange = *p == '\0' || (p[0] == '*' && p[1] == '\0');
	if (!r->have_crange)
		r->have_total = false;
}

void bfs_s3resp_header(struct bfs_s3resp *r, const char *buf, size_t n)
{
	char line[512], *colon, *v, *e;
	size_t nlen;

	if (n >= 5 && memcmp(buf, "HTTP/", 5) == 0) { /* a new response (after a 100) */
		const char *sp = memchr(buf, ' ', n);
		long st = 0;

		bfs_s3resp_reset(r);
		if (sp)
			for (const char *d = sp + 1;
			     d < buf + n && d < sp + 4 && *d >= '0' && *d <= '9'; d++)
				st = st * 10 + (*d - '0');
		r->status = st;
		return;
	}
	if (n >= sizeof(line))
		return; /* no header read here is that long */
	memcpy(line, buf, n);
	line[n] = '\0';
	colon = strchr(line, ':');
	if (!colon)
		return;
	nlen = (size_t)(colon - line);
	v = colon + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	e = v + strlen(v);
	while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t'))
		*--e = '\0';
	if (nlen == 4 && strncasecmp(line, "etag", 4) == 0) {
		snprintf(r->etag, sizeof(r->etag), "%s", v);
	} else if (nlen == 13 && strncasecmp(line, "content-range", 13) == 0) {
		parse_content_range(r, v);
	} else if (nlen == 14 && strncasecmp(line, "content-length", 14) == 0) {
		const char *p = v;

		r->have_clen = parse_u64_prefix(&p, &r->clen) && *p == '\0';
	} else if (nlen == 19 && strncasecmp(line, "x-amz-bucket-region", 19) == 0) {
		snprintf(r->bucket_region, sizeof(r->bucket_region), "%s", v);
	} else if (nlen == 11 && strncasecmp(line, "retry-after", 11) == 0) {
		long s = strtol(v, NULL, 10);

		r->retry_after_s = s > 0 && s < 3600 ? (unsigned)s : 0;
	}
}

static bool status_ok(long s)
{
	return s >= 200 && s < 300;
}

size_t bfs_s3resp_body(struct bfs_s3resp *r, const void *p, size_t n)
{
	if (status_ok(r->status)) {
		switch (r->kind) {
		case BFS_S3RESP_GET:
			if (n > r->len - r->got) {
				r->overflow = true;
				return 0;
			}
			memcpy((char *)r->dst + r->got, p, n);
			r->got += n;
			return n;
		case BFS_S3RESP_LIST:
			bfs_s3_str_add(&r->body, p, n);
			if (r->body.err) {
				r->overflow = true;
				return 0;
			}
			return n;
		default:
			return n; /* a probe's byte is not wanted */
		}
	}
	/* an error's body: keep the start, for its Code and Message */
	if (r->body.n < BFS_S3RESP_ERRBODY)
		bfs_s3_str_add(&r->body, p,
			       n < BFS_S3RESP_ERRBODY - r->body.n ? n
								  : BFS_S3RESP_ERRBODY - r->body.n);
	return n;
}

static const char *status_text(long s)
{
	switch (s) {
	case 301:
		return "Moved Permanently";
	case 307:
		return "Temporary Redirect";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 412:
		return "Precondition Failed";
	case 416:
		return "Range Not Satisfiable";
	case 429:
		return "Too Many Requests";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return "";
	}
}

/* Why the response was an error, from its XML when it has one. */
static void http_reason(const struct bfs_s3resp *r, const struct bfs_s3_config *cfg, char *dst,
			size_t cap)
{
	struct bfs_s3xml_error e;
	const char *region = r->bucket_region[0] ? r->bucket_region : NULL;
	bool xml = r->body.n && bfs_s3xml_parse_error(&e, r->body.p, r->body.n) == 0;
	size_t n;

	if (xml)
		snprintf(dst, cap, "%s: %s (HTTP %ld)", e.code,
			 e.message[0] ? e.message : status_text(r->status), r->status);
	else if (r->kind == BFS_S3RESP_HEAD && r->status == 404)
		snprintf(dst, cap, "HTTP 404 Not Found (no such key, or no such bucket)");
	else
		snprintf(dst, cap, "HTTP %ld %s", r->status, status_text(r->status));
	n = strlen(dst);
	if (!region && xml && e.region[0])
		region = e.region;
	if (region && cfg->region && strcmp(region, cfg->region) != 0)
		snprintf(dst + n, cap - n, "; the bucket is in region %s: mount with region=%s",
			 region, region);
	else if (xml && strcmp(e.code, "PermanentRedirect") == 0 && e.endpoint[0])
		snprintf(dst + n, cap - n, "; its endpoint is %s", e.endpoint);
	else if (xml && strcmp(e.code, "InvalidAccessKeyId") == 0)
		snprintf(dst + n, cap - n, "; credentials from %s",
			 cfg->source ? cfg->source : "(none)");
	else if (xml && strcmp(e.code, "SignatureDoesNotMatch") == 0)
		snprintf(dst + n, cap - n, "; check the secret key (credentials from %s)",
			 cfg->source ? cfg->source : "(none)");
}

static bool http_transient(long s)
{
	return s == 408 || s == 429 || s == 500 || s == 502 || s == 503 || s == 504;
}

static int http_errno(long s)
{
	switch (s) {
	case 404:
		return -ENOENT;
	case 401:
	case 403:
		return -EACCES;
	case 412:
		return -ESTALE;
	case 301:
	case 307:
	case 308:
	case 400:
	case 416:
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* Where the store's Code says more than the status: expired or bad session
 * tokens are refused credentials (400 by the status), a 400 RequestTimeout
 * (the store gave up waiting on the connection) passes. Returns whether to
 * try again; may change *err. */
static bool by_code(const struct bfs_s3resp *r, int *err, bool transient)
{
	static const char *const denied[] = { "ExpiredToken", "InvalidToken",
					      "TokenRefreshRequired", "InvalidAccessKeyId" };
	struct bfs_s3xml_error e;

	if (!r->body.n || bfs_s3xml_parse_error(&e, r->body.p, r->body.n) != 0)
		return transient;
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
		if (strcmp(e.code, denied[i]) == 0) {
			*err = -EACCES;
			return false;
		}
	if (strcmp(e.code, "RequestTimeout") == 0 || strcmp(e.code, "SlowDown") == 0 ||
	    strcmp(e.code, "InternalError") == 0) {
		*err = -EIO; /* what it ends in when no try passes */
		return true;
	}
	return transient;
}

static bool etag_differs(const struct bfs_s3resp *r)
{
	return r->if_match && *r->if_match && r->etag[0] && strcmp(r->etag, r->if_match) != 0;
}

/* A 2xx answer to a ranged read: is it the bytes asked for? */
static enum bfs_s3resp_verdict check_get(struct bfs_s3resp *r, int *err, char *why, size_t cap)
{
	uint64_t want_last = r->off + r->len - 1;

	if (etag_differs(r)) {
		*err = -ESTALE;
		snprintf(why, cap,
			 "the object changed since it was indexed (its ETag is %s, not %s); "
			 "re-mount to read the new version",
			 r->etag, r->if_match);
		return BFS_S3RESP_FAIL;
	}
	if (r->status == 206) {
		if (!r->have_crange || r->cr_first != r->off || r->cr_last > want_last) {
			snprintf(why, cap,
				 "a reply whose Content-Range is not bytes %" PRIu64 "-%" PRIu64,
				 r->off, want_last);
			return BFS_S3RESP_RETRY;
		}
		if (r->cr_last < want_last) {
			if (!r->have_total || r->cr_last + 1 != r->cr_total) {
				snprintf(why, cap,
					 "a reply of bytes %" PRIu64 "-%" PRIu64
					 " for bytes %" PRIu64 "-%" PRIu64,
					 r->cr_first, r->cr_last, r->off, want_last);
				return BFS_S3RESP_RETRY;
			}
			if (!r->to_end) {
				*err = -EIO;
				snprintf(why, cap,
					 "the object is only %" PRIu64 " bytes long: the range is "
					 "past its end",
					 r->cr_total);
				return BFS_S3RESP_FAIL;
			}
		}
		if (r->got != r->cr_last - r->cr_first + 1) {
			snprintf(why, cap, "a short body: %zu of %" PRIu64 " bytes", r->got,
				 r->cr_last - r->cr_first + 1);
			return BFS_S3RESP_RETRY;
		}
		r->object_size = r->have_total ? r->cr_total : 0;
		return BFS_S3RESP_OK;
	}
	if (r->status == 200) {
		/* the whole object, Range ignored: right only from offset 0 */
		if (r->off != 0) {
			*err = -EIO;
			snprintf(why, cap, "the store ignored the Range header (HTTP 200)");
			return BFS_S3RESP_FAIL;
		}
		if (r->have_clen && r->got != r->clen) {
			snprintf(why, cap, "a short body: %zu of %" PRIu64 " bytes", r->got,
				 r->clen);
			return BFS_S3RESP_RETRY;
		}
		if (r->got < r->len && !r->to_end) {
			*err = -EIO;
			snprintf(why, cap,
				 "the object is only %zu bytes long: the range is past its end",
				 r->got);
			return BFS_S3RESP_FAIL;
		}
		r->object_size = r->got;
		return BFS_S3RESP_OK;
	}
	*err = -EIO;
	snprintf(why, cap, "an unexpected HTTP %ld to a ranged read", r->status);
	return BFS_S3RESP_FAIL;
}

enum bfs_s3resp_verdict bfs_s3resp_judge(struct bfs_s3resp *r, enum bfs_s3resp_net net,
					 bool unreachable, const char *net_msg,
					 const struct bfs_s3_config *cfg, int *err, char *why,
					 size_t cap)
{
	*err = -EIO;
	why[0] = '\0';
	if (r->overflow) {
		snprintf(why, cap, "%s",
			 r->kind == BFS_S3RESP_LIST ? "a listing page larger than 32 MiB"
			 : r->status == 200 ? "the store ignored the Range header (HTTP 200 with "
					      "more bytes than the range)"
					    : "more bytes than the range asked for");
		return BFS_S3RESP_FAIL;
	}
	if (net != BFS_S3RESP_NET_OK) {
		if (unreachable)
			snprintf(why, cap, "cannot reach %s: %s",
				 cfg->endpoint ? cfg->endpoint : "the endpoint",
				 net_msg ? net_msg : "");
		else
			snprintf(why, cap, "%s", net_msg ? net_msg : "a transport error");
		return net == BFS_S3RESP_NET_TRANSIENT ? BFS_S3RESP_RETRY : BFS_S3RESP_FAIL;
	}
	if (r->kind == BFS_S3RESP_GET && r->status == 416 && r->to_end && r->off == 0 &&
	    !etag_differs(r)) {
		/* an empty object has no byte 0 */
		r->got = 0;
		r->object_size = 0;
		return BFS_S3RESP_OK;
	}
	if (!status_ok(r->status)) {
		*err = http_errno(r->status);
		if (r->status == 412) {
			snprintf(why, cap,
				 "the object changed since it was indexed (If-Match %s failed: "
				 "HTTP 412); re-mount to read the new version",
				 r->if_match ? r->if_match : "");
			return BFS_S3RESP_FAIL;
		}
		http_reason(r, cfg, why, cap);
		return by_code(r, err, http_transient(r->status)) ? BFS_S3RESP_RETRY
								  : BFS_S3RESP_FAIL;
	}
	switch (r->kind) {
	case BFS_S3RESP_GET:
		return check_get(r, err, why, cap);
	case BFS_S3RESP_HEAD:
		if (!r->have_clen) {
			snprintf(why, cap, "a HEAD reply with no Content-Length");
			return BFS_S3RESP_RETRY;
		}
		return BFS_S3RESP_OK;
	default:
		return BFS_S3RESP_OK;
	}
}
