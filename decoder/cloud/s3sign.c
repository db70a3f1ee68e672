/* SPDX-License-Identifier: Apache-2.0 */
/* s3sign.c — AWS Signature Version 4 for S3 requests (see s3sign.h). */
#include "s3sign.h"

#include "s3str.h"
#include "sha256.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* SHA-256 of the empty string: the payload hash of a GET or a HEAD. */
static const char empty_sha256[] =
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.' || c == '~';
}

static void encode_into(struct bfs_s3_str *b, const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (unreserved(*p) || (keep_slash && *p == '/')) {
			bfs_s3_str_addc(b, (char)*p);
		} else {
			char e[3] = { '%', hex[*p >> 4], hex[*p & 15] };
			bfs_s3_str_add(b, e, 3);
		}
	}
}

int bfs_s3_uri_encode(char **out, const char *s, bool keep_slash)
{
	struct bfs_s3_str b = { 0 };

	encode_into(&b, s, keep_slash);
	return bfs_s3_str_take(&b, out);
}

struct enc_pair {
	char *name, *value;
};

static int cmp_pair(const void *a, const void *b)
{
	const struct enc_pair *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

int bfs_s3_query_build(char **out, const struct bfs_s3_kv *params, size_t n)
{
	struct bfs_s3_str b = { 0 };
	struct enc_pair *v = NULL;
	size_t done = 0;
	int rc = 0;

	if (n) {
		v = calloc(n, sizeof(*v));
		if (!v)
			return -ENOMEM;
	}
	for (; done < n; done++) {
		rc = bfs_s3_uri_encode(&v[done].name, params[done].name, false);
		if (rc)
			goto out;
		rc = bfs_s3_uri_encode(&v[done].value, params[done].value ? params[done].value : "",
				       false);
		if (rc) {
			free(v[done].name);
			goto out;
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_pair);
	for (size_t i = 0; i < n; i++) {
		if (i)
			bfs_s3_str_addc(&b, '&');
		bfs_s3_str_adds(&b, v[i].name);
		bfs_s3_str_addc(&b, '=');
		bfs_s3_str_adds(&b, v[i].value);
	}
	rc = bfs_s3_str_take(&b, out);
out:
	for (size_t i = 0; i < done; i++) {
		free(v[i].name);
		free(v[i].value);
	}
	free(v);
	return rc;
}

/* One canonical header: the lower-cased name and the trimmed value. */
struct canon_hdr {
	char *name, *value;
};

static int cmp_hdr(const void *a, const void *b)
{
	return strcmp(((const struct canon_hdr *)a)->name, ((const struct canon_hdr *)b)->name);
}

static bool is_token_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f && !strchr("\"(),/:;<=>?@[\\]{}", c);
}

/* name lower-cased, or -EINVAL when it is not an HTTP token. */
static int canon_name(char **out, const char *name)
{
	size_t n = strlen(name);
	char *p;

	if (n == 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!is_token_char((unsigned char)name[i]))
			return -EINVAL;
	p = malloc(n + 1);
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i <= n; i++)
		p[i] = (char)((name[i] >= 'A' && name[i] <= 'Z') ? name[i] - 'A' + 'a' : name[i]);
	*out = p;
	return 0;
}

/* value trimmed, runs of blanks made one space; -EINVAL for a control
 * character (CR and LF would split the header). */
static int canon_value(char **out, const char *value)
{
	size_t n = value ? strlen(value) : 0, k = 0;
	bool blank = false;
	char *p = malloc(n + 1);

	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)value[i];

		if (c == ' ' || c == '\t') {
			blank = k > 0;
			continue;
		}
		if (c < 0x20 || c == 0x7f) {
			free(p);
			return -EINVAL;
		}
		if (blank)
			p[k++] = ' ';
		blank = false;
		p[k++] = (char)c;
	}
	p[k] = '\0';
	*out = p;
	return 0;
}

/* The names the signer sets itself: a caller must not pass them. */
static bool reserved_name(const char *lname)
{
	static const char *const names[] = { "host", "x-amz-date", "x-amz-content-sha256",
					     "x-amz-security-token", "authorization" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(lname, names[i]) == 0)
			return true;
	return false;
}

/* Printable, and no separator of the Credential= field. */
static bool scope_part_ok(const char *s)
{
	if (!s || !*s || strlen(s) > 128)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p <= 0x20 || *p >= 0x7f || *p == '/' || *p == ',' || *p == '=')
			return false;
	return true;
}

struct signing {
	char amz_date[17];
	const char *payload_hash;
	struct canon_hdr *h;
	size_t nh;
	char *signed_headers; /* "host;range;x-amz-date" */
	char *creq;
	char *sts;
	char scope[256]; /* YYYYMMDD/region/service/aws4_request */
};

static void signing_free(struct signing *s)
{
	for (size_t i = 0; i < s->nh; i++) {
		free(s->h[i].name);
		free(s->h[i].value);
	}
	free(s->h);
	free(s->signed_headers);
	free(s->creq);
	free(s->sts);
}

static int add_hdr(struct signing *s, const char *name, const char *value, bool from_caller)
{
	struct canon_hdr *h = &s->h[s->nh];
	int rc = canon_name(&h->name, name);

	if (rc)
		return rc;
	if (from_caller && reserved_name(h->name)) {
		free(h->name);
		return -EINVAL;
	}
	rc = canon_value(&h->value, value);
	if (rc) {
		free(h->name);
		return rc;
	}
	s->nh++;
	return 0;
}

static int prepare(struct signing *s, const struct bfs_s3_sigreq *r, const struct bfs_s3_creds *cr)
{
	struct bfs_s3_str b = { 0 };
	struct tm tm;
	uint8_t d[BFS_SHA256_LEN];
	char hex[2 * BFS_SHA256_LEN + 1];
	int rc;

	memset(s, 0, sizeof(*s));
	if (!r->method || !r->host || !r->path || !scope_part_ok(r->region) ||
	    !scope_part_ok(r->service) || !cr || !scope_part_ok(cr->key_id) || !cr->secret)
		return -EINVAL;
	if (!gmtime_r(&r->when, &tm) ||
	    strftime(s->amz_date, sizeof(s->amz_date), "%Y%m%dT%H%M%SZ", &tm) != 16)
		return -EINVAL;
	if (snprintf(s->scope, sizeof(s->scope), "%.8s/%s/%s/aws4_request", s->amz_date, r->region,
		     r->service) >= (int)sizeof(s->scope))
		return -EINVAL;
	s->payload_hash = r->payload_hash ? r->payload_hash : empty_sha256;
	if (strlen(s->payload_hash) >= sizeof(((struct bfs_s3_signed *)0)->content_sha256))
		return -EINVAL;

	s->h = calloc(r->nheaders + 4, sizeof(*s->h));
	if (!s->h)
		return -ENOMEM;
	if ((rc = add_hdr(s, "host", r->host, false)) ||
	    (rc = add_hdr(s, "x-amz-content-sha256", s->payload_hash, false)) ||
	    (rc = add_hdr(s, "x-amz-date", s->amz_date, false)))
		return rc;
	if (cr->token && (rc = add_hdr(s, "x-amz-security-token", cr->token, false)))
		return rc;
	for (size_t i = 0; i < r->nheaders; i++)
		if ((rc = add_hdr(s, r->headers[i].name, r->headers[i].value, true)))
			return rc;
	qsort(s->h, s->nh, sizeof(*s->h), cmp_hdr);
	for (size_t i = 1; i < s->nh; i++)
		if (strcmp(s->h[i - 1].name, s->h[i].name) == 0)
			return -EINVAL;

	for (size_t i = 0; i < s->nh; i++) {
		if (i)
			bfs_s3_str_addc(&b, ';');
		bfs_s3_str_adds(&b, s->h[i].name);
	}
	if ((rc = bfs_s3_str_take(&b, &s->signed_headers)))
		return rc;

	/* the canonical request */
	bfs_s3_str_adds(&b, r->method);
	bfs_s3_str_addc(&b, '\n');
	bfs_s3_str_adds(&b, *r->path ? r->path : "/");
	bfs_s3_str_addc(&b, '\n');
	bfs_s3_str_adds(&b, r->query ? r->query : "");
	bfs_s3_str_addc(&b, '\n');
	for (size_t i = 0; i < s->nh; i++) {
		bfs_s3_str_adds(&b, s->h[i].name);
		bfs_s3_str_addc(&b, ':');
		bfs_s3_str_adds(&b, s->h[i].value);
		bfs_s3_str_addc(&b, '\n');
	}
	bfs_s3_str_addc(&b, '\n');
	bfs_s3_str_adds(&b, s->signed_headers);
	bfs_s3_str_addc(&b, '\n');
	bfs_s3_str_adds(&b, s->payload_hash);
	if ((rc = bfs_s3_str_take(&b, &s->creq)))
		return rc;

	/* the string to sign */
	bfs_sha256_digest(d, s->creq, strlen(s->creq));
	bfs_sha256_hex(hex, d);
	bfs_s3_str_addf(&b, "AWS4-HMAC-SHA256\n%s\n%s\n%s", s->amz_date, s->scope, hex);
	return bfs_s3_str_take(&b, &s->sts);
}

int bfs_s3_sign_canonical(char **creq, char **sts, const struct bfs_s3_sigreq *r,
			  const struct bfs_s3_creds *cr)
{
	struct signing s;
	int rc = prepare(&s, r, cr);

	if (rc == 0) {
		*creq = s.creq;
		*sts = s.sts;
		s.creq = s.sts = NULL;
	}
	signing_free(&s);
	return rc;
}

int bfs_s3_sign(struct bfs_s3_signed *out, const struct bfs_s3_sigreq *r,
		const struct bfs_s3_creds *cr)
{
	struct signing s;
	uint8_t k[BFS_SHA256_LEN], sig[BFS_SHA256_LEN];
	char hex[2 * BFS_SHA256_LEN + 1];
	char *key0 = NULL;
	size_t slen;
	int rc = prepare(&s, r, cr), n;

	if (rc)
		goto out;
	/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" secret, date), region), service),
	 * "aws4_request"); the first key is wiped as soon as it is used */
	slen = strlen(cr->secret);
	key0 = malloc(slen + 4);
	if (!key0) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(key0, "AWS4", 4);
	memcpy(key0 + 4, cr->secret, slen);
	bfs_sha256_hmac(k, key0, slen + 4, s.amz_date, 8);
	explicit_bzero(key0, slen + 4);
	bfs_sha256_hmac(k, k, sizeof(k), r->region, strlen(r->region));
	bfs_sha256_hmac(k, k, sizeof(k), r->service, strlen(r->service));
	bfs_sha256_hmac(k, k, sizeof(k), "aws4_request", 12);
	bfs_sha256_hmac(sig, k, sizeof(k), s.sts, strlen(s.sts));
	explicit_bzero(k, sizeof(k));
	bfs_sha256_hex(hex, sig);

	n = snprintf(out->authorization, sizeof(out->authorization),
		     "AWS4-HMAC-SHA256 Credential=%s/%s,SignedHeaders=%s,Signature=%s", cr->key_id,
		     s.scope, s.signed_headers, hex);
	if (n < 0 || (size_t)n >= sizeof(out->authorization)) {
		rc = -EINVAL;
		goto out;
	}
	memcpy(out->amz_date, s.amz_date, sizeof(out->amz_date));
	snprintf(out->content_sha256, sizeof(out->content_sha256), "%s", s.payload_hash);
out:
	free(key0);
	signing_free(&s);
	return rc;
}
