/* SPDX-License-Identifier: Apache-2.0 */
/* s3conf.c — object-store URLs, the configuration's copies, request
 * addresses, the retry policy and messages. No I/O. See s3.h and s3_impl.h;
 * the configuration is resolved in s3resolve.c. */
#include "s3.h"

#include "cred.h"
#include "s3_impl.h"
#include "s3sign.h"

#include <ctype.h>
#include <fnmatch.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_KEY_LEN 1024 /* S3's and GCS's limit on a key */

/* ---- URLs ---- */

static bool has_prefix_ci(const char *s, const char *p)
{
	return strncasecmp(s, p, strlen(p)) == 0;
}

bool bfs_s3_url_is(const char *s)
{
	return s && (has_prefix_ci(s, "s3://") || has_prefix_ci(s, "gs://"));
}

/* Index of the first unescaped glob character of s[0..n), or n. */
static size_t glob_at(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && i + 1 < n) {
			i++;
			continue;
		}
		if (s[i] == '*' || s[i] == '?' || s[i] == '[')
			return i;
	}
	return n;
}

static bool bucket_char_ok(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_';
}

void bfs_s3_url_destroy(struct bfs_s3_url *u)
{
	if (!u)
		return;
	free(u->bucket);
	free(u->key);
	free(u->prefix);
	memset(u, 0, sizeof(*u));
}

int bfs_s3_url_parse(struct bfs_s3_url *out, const char *url)
{
	struct bfs_s3_url u = { 0 };
	const char *rest, *slash, *path;
	size_t blen, plen, g;

	if (!bfs_s3_url_is(url))
		return bfs_err_set(-EINVAL, "'%.200s' is not an s3:// or gs:// URL",
				   url ? url : "");
	u.scheme = has_prefix_ci(url, "gs://") ? BFS_S3_SCHEME_GS : BFS_S3_SCHEME_S3;
	rest = url + 5;
	slash = strchr(rest, '/');
	blen = slash ? (size_t)(slash - rest) : strlen(rest);
	path = slash ? slash + 1 : "";
	plen = strlen(path);
	if (blen == 0)
		return bfs_err_set(-EINVAL, "%.200s: no bucket name", url);
	if (blen > 222)
		return bfs_err_set(-EINVAL, "%.200s: the bucket name is longer than 222 characters",
				   url);
	for (size_t i = 0; i < blen; i++)
		if (!bucket_char_ok(rest[i]))
			return bfs_err_set(
				-EINVAL, "%.200s: '%c' in the bucket name%s", url, rest[i],
				strchr("*?[", rest[i]) ? " (a glob is allowed only in the "
							 "last part of the key)"
						       : "");
	if (plen > MAX_KEY_LEN)
		return bfs_err_set(-EINVAL, "%.200s...: a key is at most %d bytes", url,
				   MAX_KEY_LEN);
	g = glob_at(path, plen);
	if (g < plen) {
		const char *last = strrchr(path, '/');
		size_t dir = last ? (size_t)(last - path) + 1 : 0;

		if (g < dir)
			return bfs_err_set(-EINVAL,
					   "%.200s: a glob is allowed only in the last part of the "
					   "key, not in its folders",
					   url);
		u.kind = BFS_S3_URL_GLOB;
		/* list from the literal start of the pattern (an escape ends it) */
		for (g = dir; g < plen && path[g] != '\\' && path[g] != '*' && path[g] != '?' &&
			      path[g] != '[';
		     g++)
			;
		u.prefix = strndup(path, g);
	} else {
		u.kind = (plen == 0 || path[plen - 1] == '/') ? BFS_S3_URL_PREFIX : BFS_S3_URL_KEY;
		u.prefix = strdup(path);
	}
	u.bucket = strndup(rest, blen);
	u.key = strdup(path);
	if (!u.bucket || !u.key || !u.prefix) {
		bfs_s3_url_destroy(&u);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	*out = u;
	return 0;
}

bool bfs_s3_url_match(const struct bfs_s3_url *u, const char *key)
{
	const char *last, *name;
	size_t dir;

	switch (u->kind) {
	case BFS_S3_URL_PREFIX:
		return strncmp(key, u->key, strlen(u->key)) == 0;
	case BFS_S3_URL_KEY:
		return strcmp(key, u->key) == 0;
	case BFS_S3_URL_GLOB:
		last = strrchr(u->key, '/');
		dir = last ? (size_t)(last - u->key) + 1 : 0;
		if (strncmp(key, u->key, dir) != 0)
			return false;
		name = key + dir;
		return !strchr(name, '/') && fnmatch(u->key + dir, name, FNM_PERIOD) == 0;
	}
	return false;
}

/* ---- configuration ---- */

void bfs_s3_config_init(struct bfs_s3_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->tries = 8;
	cfg->retry_ms = 30000;
	cfg->backoff_ms = 100;
	cfg->backoff_max_ms = 5000;
	cfg->connect_timeout_ms = 5000;
	cfg->stall_timeout_ms = 20000;
}

static void free_secret(char **p)
{
	if (*p) {
		explicit_bzero(*p, strlen(*p));
		free(*p);
		*p = NULL;
	}
}

void bfs_s3_config_destroy(struct bfs_s3_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->endpoint);
	free(cfg->region);
	free(cfg->key_id);
	free_secret(&cfg->secret);
	free_secret(&cfg->session_token);
	free(cfg->source);
	free(cfg->ca_file);
	bfs_cred_keeper_unref(cfg->keeper);
	bfs_s3_config_init(cfg);
}

static int dup_opt(char **dst, const char *src)
{
	*dst = NULL;
	if (src && !(*dst = strdup(src)))
		return -ENOMEM;
	return 0;
}

int bfs_s3_config_copy(struct bfs_s3_config *dst, const struct bfs_s3_config *src)
{
	struct bfs_s3_config c = *src;

	c.endpoint = c.region = c.key_id = c.secret = c.session_token = c.source = c.ca_file = NULL;
	c.keeper = NULL;
	if (dup_opt(&c.endpoint, src->endpoint) || dup_opt(&c.region, src->region) ||
	    dup_opt(&c.key_id, src->key_id) || dup_opt(&c.secret, src->secret) ||
	    dup_opt(&c.session_token, src->session_token) || dup_opt(&c.source, src->source) ||
	    dup_opt(&c.ca_file, src->ca_file)) {
		bfs_s3_config_destroy(&c);
		return -ENOMEM;
	}
	c.keeper = bfs_cred_keeper_ref(src->keeper);
	*dst = c;
	return 0;
}

/* A parsed endpoint. */
struct endpoint {
	bool https;
	char host[256]; /* an IPv6 literal keeps its brackets */
	unsigned port; /* 0: the scheme's default */
	const char *base; /* the path after the authority, maybe "", never ending in '/' */
	size_t base_len;
};

static int endpoint_parse(struct endpoint *e, const char *ep)
{
	const char *a, *end, *colon;
	size_t alen, hlen;

	memset(e, 0, sizeof(*e));
	if (has_prefix_ci(ep, "https://")) {
		e->https = true;
		a = ep + 8;
	} else if (has_prefix_ci(ep, "http://")) {
		a = ep + 7;
	} else {
		return bfs_err_set(-EINVAL,
				   "endpoint '%.200s': it must start with http:// or https://", ep);
	}
	if (strchr(a, '@')) /* not echoed: what is before the '@' may be a secret */
		return bfs_err_set(-EINVAL,
				   "an endpoint holds no user or password (credentials go in the "
				   "environment or ~/.aws/credentials)");
	if (strpbrk(a, "?# \t\r\n"))
		return bfs_err_set(
			-EINVAL, "endpoint '%.200s': no query, fragment or blank may be in it", ep);
	end = strchr(a, '/');
	alen = end ? (size_t)(end - a) : strlen(a);
	if (a[0] == '[') {
		const char *rb = memchr(a, ']', alen);

		if (!rb)
			return bfs_err_set(-EINVAL, "endpoint '%.200s': an unclosed '['", ep);
		hlen = (size_t)(rb - a) + 1;
		colon = hlen < alen ? a + hlen : NULL;
		if (colon && *colon != ':')
			return bfs_err_set(-EINVAL, "endpoint '%.200s': a bad host", ep);
	} else {
		colon = memchr(a, ':', alen);
		hlen = colon ? (size_t)(colon - a) : alen;
	}
	if (hlen == 0 || hlen >= sizeof(e->host))
		return bfs_err_set(-EINVAL, "endpoint '%.200s': no host", ep);
	for (size_t i = 0; i < hlen; i++)
		e->host[i] = (char)tolower((unsigned char)a[i]);
	e->host[hlen] = '\0';
	if (colon) {
		unsigned long port = 0;
		size_t digits = alen - hlen - 1;

		if (digits == 0 || digits > 5)
			return bfs_err_set(-EINVAL, "endpoint '%.200s': a bad port", ep);
		for (size_t i = 1; i <= digits; i++) {
			if (!isdigit((unsigned char)colon[i]))
				return bfs_err_set(-EINVAL, "endpoint '%.200s': a bad port", ep);
			port = port * 10 + (unsigned long)(colon[i] - '0');
		}
		if (port == 0 || port > 65535)
			return bfs_err_set(-EINVAL, "endpoint '%.200s': a bad port", ep);
		if (port != (e->https ? 443u : 80u))
			e->port = (unsigned)port;
	}
	e->base = end ? end : "";
	e->base_len = strlen(e->base);
	while (e->base_len && e->base[e->base_len - 1] == '/')
		e->base_len--;
	return 0;
}

int bfs_s3_endpoint_normal(char **out, const char *ep)
{
	struct endpoint e;
	size_t n;
	int rc = endpoint_parse(&e, ep);

	if (rc)
		return rc;
	n = strlen(e.host) + e.base_len + 24;
	*out = malloc(n);
	if (!*out)
		return bfs_err_set(-ENOMEM, "out of memory");
	if (e.port)
		snprintf(*out, n, "%s://%s:%u%.*s", e.https ? "https" : "http", e.host, e.port,
			 (int)e.base_len, e.base);
	else
		snprintf(*out, n, "%s://%s%.*s", e.https ? "https" : "http", e.host,
			 (int)e.base_len, e.base);
	return 0;
}

void bfs_s3_config_describe(const struct bfs_s3_config *cfg, char *dst, size_t cap)
{
	char id[16] = "";
	size_t n = cfg->key_id ? strlen(cfg->key_id) : 0;

	if (cfg->keeper && !cfg->anonymous) {
		char cred[600];

		bfs_cred_keeper_describe(cfg->keeper, cred, sizeof(cred));
		snprintf(dst, cap, "endpoint %s (%s), region %s, credentials: %s",
			 cfg->endpoint ? cfg->endpoint : "(none)",
			 cfg->path_style ? "path-style" : "virtual-hosted",
			 cfg->region ? cfg->region : "(none)", cred);
		return;
	}
	if (n)
		snprintf(id, sizeof(id), "****%s", cfg->key_id + (n > 4 ? n - 4 : 0));
	snprintf(dst, cap, "endpoint %s (%s), region %s, credentials: %s%s%s%s%s",
		 cfg->endpoint ? cfg->endpoint : "(none)",
		 cfg->path_style ? "path-style" : "virtual-hosted",
		 cfg->region ? cfg->region : "(none)", cfg->source ? cfg->source : "(none)",
		 n ? ", key id " : "", id, cfg->session_token ? ", with a session token" : "",
		 cfg->anonymous ? ", anonymous requests" : "");
}

/* ---- addresses ---- */

/* Whether bucket can be a host name label sequence (virtual-hosted). */
static bool bucket_dns_ok(const char *b, bool https)
{
	size_t n = strlen(b);

	if (n < 3 || n > 63 || !isalnum((unsigned char)b[0]) || !isalnum((unsigned char)b[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = b[i];

		if (!(islower((unsigned char)c) || isdigit((unsigned char)c) || c == '-' ||
		      c == '.'))
			return false;
		if (c == '.' && (https || b[i + 1] == '.'))
			return false;
	}
	return true;
}

void bfs_s3_target_destroy(struct bfs_s3_target *t)
{
	if (!t)
		return;
	free(t->url);
	free(t->host);
	free(t->path);
	memset(t, 0, sizeof(*t));
}

int bfs_s3_target_build(struct bfs_s3_target *t, const struct bfs_s3_config *cfg,
			const char *bucket, const char *key, const char *query)
{
	struct bfs_s3_target r = { 0 };
	struct bfs_s3_str host = { 0 }, path = { 0 }, url = { 0 };
	struct endpoint e;
	bool vhost;
	char *enc = NULL;
	int rc;

	if (!cfg->endpoint)
		return bfs_err_set(-EINVAL, "no endpoint");
	if ((rc = endpoint_parse(&e, cfg->endpoint)))
		return rc;
	vhost = !cfg->path_style && e.host[0] != '[' && !isdigit((unsigned char)e.host[0]) &&
		bucket_dns_ok(bucket, e.https);
	if (vhost) {
		bfs_s3_str_adds(&host, bucket);
		bfs_s3_str_addc(&host, '.');
	}
	bfs_s3_str_adds(&host, e.host);
	if (e.port)
		bfs_s3_str_addf(&host, ":%u", e.port);

	bfs_s3_str_add(&path, e.base, e.base_len);
	if (!vhost) {
		if ((rc = bfs_s3_uri_encode(&enc, bucket, false)))
			goto out;
		bfs_s3_str_addc(&path, '/');
		bfs_s3_str_adds(&path, enc);
		free(enc);
		enc = NULL;
	}
	if (key) {
		if ((rc = bfs_s3_uri_encode(&enc, key, true)))
			goto out;
		bfs_s3_str_addc(&path, '/');
		bfs_s3_str_adds(&path, enc);
	} else if (vhost || path.n == 0) {
		bfs_s3_str_addc(&path, '/');
	}

	bfs_s3_str_adds(&url, e.https ? "https://" : "http://");
	if (host.p)
		bfs_s3_str_adds(&url, host.p);
	if (path.p)
		bfs_s3_str_adds(&url, path.p);
	if (query && *query) {
		bfs_s3_str_addc(&url, '?');
		bfs_s3_str_adds(&url, query);
	}
	if ((rc = bfs_s3_str_take(&host, &r.host)) || (rc = bfs_s3_str_take(&path, &r.path)) ||
	    (rc = bfs_s3_str_take(&url, &r.url)))
		goto out;
	*t = r;
	memset(&r, 0, sizeof(r));
out:
	free(enc);
	bfs_s3_str_free(&host);
	bfs_s3_str_free(&path);
	bfs_s3_str_free(&url);
	bfs_s3_target_destroy(&r);
	if (rc == -ENOMEM)
		bfs_err_format("out of memory");
	return rc;
}

/* ---- the retry policy ---- */

unsigned bfs_s3_backoff_ms(const struct bfs_s3_config *cfg, unsigned retry, uint64_t rnd)
{
	return bfs_backoff_ms(cfg->backoff_ms, cfg->backoff_max_ms, retry, rnd);
}

/* ---- messages ---- */

void bfs_s3_msg_clean(char *msg, size_t cap, const struct bfs_s3_config *cfg)
{
	const char *secrets[] = { cfg->secret, cfg->session_token };

	if (msg && cap >= 16)
		bfs_cred_scrub(msg, cap, secrets, 2);
}
