/* SPDX-License-Identifier: Apache-2.0 */
/* s3conf.c — object-store URLs, configuration (options, environment,
 * ~/.aws files), request addresses and the retry policy. No I/O but the
 * reading of the two profile files. See s3.h. */
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
#define MAX_PROFILE_FILE (1u << 20)

/* ---- objects ---- */

void bfs_s3_object_destroy(struct bfs_s3_object *o)
{
	if (!o)
		return;
	free(o->key);
	free(o->etag);
	memset(o, 0, sizeof(*o));
}

void bfs_s3_objects_free(struct bfs_s3_object *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		bfs_s3_object_destroy(&v[i]);
	free(v);
}

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

/* An environment variable, NULL when unset or empty. */
static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

void bfs_s3_ini_free(struct bfs_s3_ini *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->keys[i]);
		free_secret(&s->vals[i]);
	}
	free(s->keys);
	free(s->vals);
	memset(s, 0, sizeof(*s));
}

const char *bfs_s3_ini_get(const struct bfs_s3_ini *s, const char *key)
{
	for (size_t i = s->n; i-- > 0;) /* the last one given wins */
		if (strcmp(s->keys[i], key) == 0)
			return s->vals[i];
	return NULL;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		*--e = '\0';
	return s;
}

static int ini_add(struct bfs_s3_ini *s, const char *parent, const char *key, const char *val)
{
	char *k, *v;

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		char **nk = realloc(s->keys, cap * sizeof(*nk));

		if (!nk)
			return -ENOMEM;
		s->keys = nk;
		nk = realloc(s->vals, cap * sizeof(*nk));
		if (!nk)
			return -ENOMEM;
		s->vals = nk;
		s->cap = cap;
	}
	if (parent) {
		size_t n = strlen(parent) + strlen(key) + 2;

		k = malloc(n);
		if (k)
			snprintf(k, n, "%s.%s", parent, key);
	} else {
		k = strdup(key);
	}
	v = strdup(val);
	if (!k || !v) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	for (char *c = k; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	s->keys[s->n] = k;
	s->vals[s->n] = v;
	s->n++;
	return 0;
}

/* Parse text (modified) for section `want`. */
static int ini_parse(struct bfs_s3_ini *s, char *text, const char *want)
{
	bool in = false;
	char parent[128] = "";

	for (char *line = text, *next; line; line = next) {
		char *eq, *key, *val, *t;
		bool indented = line[0] == ' ' || line[0] == '\t';

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		t = trim(line);
		if (*t == '\0' || *t == '#' || *t == ';')
			continue;
		if (*t == '[') {
			char *end = strrchr(t, ']');

			if (!end)
				continue;
			*end = '\0';
			in = strcmp(trim(t + 1), want) == 0;
			s->found |= in;
			parent[0] = '\0';
			continue;
		}
		if (!in || !(eq = strchr(t, '=')))
			continue;
		*eq = '\0';
		key = trim(t);
		val = trim(eq + 1);
		if (indented && parent[0]) {
			if (ini_add(s, parent, key, val))
				return -ENOMEM;
			continue;
		}
		parent[0] = '\0';
		if (*val == '\0' && strlen(key) < sizeof(parent))
			snprintf(parent, sizeof(parent), "%s", key);
		else if (ini_add(s, NULL, key, val))
			return -ENOMEM;
	}
	return 0;
}

/* Load section `want` of path; a missing file is an empty one. */
int bfs_s3_ini_load(struct bfs_s3_ini *s, const char *path, const char *want)
{
	FILE *f = fopen(path, "r");
	char *text = NULL;
	size_t n;
	int rc;

	memset(s, 0, sizeof(*s));
	if (!f) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return bfs_err_set(-EINVAL, "cannot read %s: %s", path, strerror(errno));
	}
	text = malloc(MAX_PROFILE_FILE + 1);
	if (!text) {
		fclose(f);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	n = fread(text, 1, MAX_PROFILE_FILE + 1, f);
	rc = ferror(f);
	fclose(f);
	if (rc || n > MAX_PROFILE_FILE) {
		explicit_bzero(text, n);
		free(text);
		return bfs_err_set(-EINVAL, "cannot read %s: %s", path,
				   rc ? "read error" : "larger than 1 MiB");
	}
	text[n] = '\0';
	rc = ini_parse(s, text, want);
	explicit_bzero(text, n);
	free(text);
	if (rc) {
		bfs_s3_ini_free(s);
		return bfs_err_set(rc, "out of memory");
	}
	return 0;
}

/* $VAR, else ~/.aws/NAME; a leading "~/" is the home directory. */
int bfs_s3_profile_path(char *out, size_t cap, const char *var, const char *name)
{
	const char *v = env(var), *home = env("HOME");
	struct passwd pw, *res = NULL;
	char pwbuf[4096];
	int n;

	if (!home && getpwuid_r(getuid(), &pw, pwbuf, sizeof(pwbuf), &res) == 0 && res)
		home = pw.pw_dir;
	if (!home)
		home = "/";
	if (v && v[0] != '~')
		n = snprintf(out, cap, "%s", v);
	else if (v)
		n = snprintf(out, cap, "%s%s", home, v + 1);
	else
		n = snprintf(out, cap, "%s/.aws/%s", home, name);
	if (n < 0 || (size_t)n >= cap)
		return bfs_err_set(-EINVAL, "%s: the path of the %s file is too long",
				   v ? var : "HOME", name);
	return 0;
}

static bool region_ok(const char *r)
{
	size_t n = strlen(r);

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)r[i]) && r[i] != '-' && r[i] != '_')
			return false;
	return true;
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

/* The endpoint in its normal form: scheme and host lower-case, no default
 * port, no '/' at the end. */
static int endpoint_normal(char **out, const char *ep)
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

struct resolving {
	struct bfs_s3_config c;
	const char *profile;
	bool profile_named; /* given, not the default */
	char cred_path[PATH_MAX], conf_path[PATH_MAX];
	struct bfs_s3_ini cred, conf;
};

static int set_str(char **dst, const char *v)
{
	char *p = strdup(v);

	if (!p)
		return bfs_err_set(-ENOMEM, "out of memory");
	free(*dst);
	*dst = p;
	return 0;
}

/* Credentials: s3 the AWS chain; gs HMAC keys, else Google's ADC. */
static int resolve_credentials(struct resolving *r, enum bfs_s3_scheme scheme,
			       const struct bfs_s3_options *opt)
{
	struct bfs_cred_keeper *k = NULL;
	struct bfs_cred *c = NULL;
	char looked[2048] = "", why[512];
	int rc;

	if (scheme == BFS_S3_SCHEME_S3) {
		rc = bfs_credaws_chain(&k, opt->profile, r->c.region, r->c.ca_file, looked,
				       sizeof(looked));
	} else {
		rc = bfs_credaws_static(&k, opt->profile, looked, sizeof(looked));
		/* credgcp.c is linked in (a weak reference would not pull it out
		 * of the static library) */
		if (rc == -ENOENT) {
			size_t n = strlen(looked);

			if (n + 2 < sizeof(looked))
				snprintf(looked + n, sizeof(looked) - n, n ? ", " : "");
			n = strlen(looked);
			rc = bfs_credgcp_chain(&k, r->c.ca_file, looked + n, sizeof(looked) - n);
		}
	}
	if (rc == -ENOENT)
		return bfs_err_set(-EACCES,
				   "no credentials: looked in %s; give credentials there, or use "
				   "no_sign_request for a public bucket",
				   looked);
	if (rc)
		return rc;
	r->c.keeper = k;
	rc = bfs_cred_keeper_get(k, &c, why, sizeof(why));
	if (rc)
		return bfs_err_set(rc, "%s", why);
	if (c->kind == BFS_CRED_SIGV4 && c->expires == 0) { /* keys that never change */
		if ((rc = set_str(&r->c.key_id, c->key_id)) ||
		    (rc = set_str(&r->c.secret, c->secret)) ||
		    (c->token && (rc = set_str(&r->c.session_token, c->token)))) {
			bfs_cred_unref(c);
			return rc;
		}
	}
	rc = set_str(&r->c.source, c->source);
	bfs_cred_unref(c);
	return rc;
}

static int resolve(struct resolving *r, enum bfs_s3_scheme scheme, const struct bfs_s3_options *opt)
{
	const char *endpoint = opt->endpoint, *region = opt->region, *style;
	char section[300];
	int rc;

	r->profile = opt->profile ? opt->profile : env("AWS_PROFILE");
	r->profile_named = r->profile != NULL;
	if (!r->profile)
		r->profile = "default";
	if (strlen(r->profile) > 200)
		return bfs_err_set(-EINVAL, "a profile name longer than 200 characters");
	if ((rc = bfs_s3_ini_load(&r->cred, r->cred_path, r->profile)))
		return rc;
	if (strcmp(r->profile, "default") == 0)
		snprintf(section, sizeof(section), "default");
	else
		snprintf(section, sizeof(section), "profile %s", r->profile);
	if ((rc = bfs_s3_ini_load(&r->conf, r->conf_path, section)))
		return rc;
	if (!r->conf.found && strcmp(r->profile, "default") == 0) {
		bfs_s3_ini_free(&r->conf); /* "[profile default]" is read too */
		if ((rc = bfs_s3_ini_load(&r->conf, r->conf_path, "profile default")))
			return rc;
	}

	r->c.scheme = scheme;
	if (!region)
		region = env("AWS_REGION");
	if (!region)
		region = env("AWS_DEFAULT_REGION");
	if (!region)
		region = bfs_s3_ini_get(&r->conf, "region");
	if (!region || !*region)
		region = scheme == BFS_S3_SCHEME_GS ? "auto" : "us-east-1";
	if (!region_ok(region))
		return bfs_err_set(-EINVAL, "region '%.100s': not a region name", region);
	if ((rc = set_str(&r->c.region, region)))
		return rc;

	if (scheme == BFS_S3_SCHEME_S3 && !endpoint) {
		endpoint = env("AWS_ENDPOINT_URL_S3");
		if (!endpoint)
			endpoint = env("AWS_ENDPOINT_URL");
		if (!endpoint)
			endpoint = bfs_s3_ini_get(&r->conf, "s3.endpoint_url");
		if (!endpoint)
			endpoint = bfs_s3_ini_get(&r->conf, "endpoint_url");
	}
	if (endpoint && *endpoint) {
		if ((rc = endpoint_normal(&r->c.endpoint, endpoint)))
			return rc;
		r->c.path_style = true;
	} else if (scheme == BFS_S3_SCHEME_GS) {
		if ((rc = set_str(&r->c.endpoint, "https://storage.googleapis.com")))
			return rc;
		r->c.path_style = true;
	} else {
		char ep[160];

		snprintf(ep, sizeof(ep), "https://s3.%s.amazonaws.com%s", region,
			 strncmp(region, "cn-", 3) == 0 ? ".cn" : "");
		if ((rc = set_str(&r->c.endpoint, ep)))
			return rc;
		r->c.path_style = false;
	}
	style = bfs_s3_ini_get(&r->conf, "s3.addressing_style");
	if (style && strcmp(style, "virtual") == 0)
		r->c.path_style = false;
	else if (style && strcmp(style, "path") == 0)
		r->c.path_style = true;

	if (env("AWS_CA_BUNDLE") && (rc = set_str(&r->c.ca_file, env("AWS_CA_BUNDLE"))))
		return rc;

	if (opt->no_sign_request) {
		r->c.anonymous = true;
		return set_str(&r->c.source, "none (no_sign_request)");
	}
	return resolve_credentials(r, scheme, opt);
}

/* AWS_MAX_ATTEMPTS (the AWS convention): the tries of a request. */
static int max_attempts(struct bfs_s3_config *c)
{
	const char *v = env("AWS_MAX_ATTEMPTS");
	char *end = NULL;
	unsigned long n;

	if (!v)
		return 0;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || !end || *end || n < 1 || n > 100 || *v == '-' || *v == '+')
		return bfs_err_set(-EINVAL, "AWS_MAX_ATTEMPTS=%s: not a number from 1 to 100", v);
	c->tries = (unsigned)n;
	return 0;
}

int bfs_s3_config_resolve(struct bfs_s3_config *cfg, enum bfs_s3_scheme scheme,
			  const struct bfs_s3_options *opt)
{
	static const struct bfs_s3_options none = { 0 };
	struct resolving r = { 0 };
	int rc;

	/* the policy comes from cfg, the rest is found again */
	r.c = *cfg;
	r.c.endpoint = r.c.region = r.c.key_id = r.c.secret = r.c.session_token = r.c.source =
		r.c.ca_file = NULL;
	r.c.keeper = NULL;
	r.c.anonymous = false;
	rc = bfs_s3_profile_path(r.cred_path, sizeof(r.cred_path), "AWS_SHARED_CREDENTIALS_FILE",
				 "credentials");
	if (rc == 0)
		rc = bfs_s3_profile_path(r.conf_path, sizeof(r.conf_path), "AWS_CONFIG_FILE",
					 "config");
	if (rc == 0)
		rc = resolve(&r, scheme, opt ? opt : &none);
	if (rc == 0)
		rc = max_attempts(&r.c);
	bfs_s3_ini_free(&r.cred);
	bfs_s3_ini_free(&r.conf);
	if (rc) {
		bfs_s3_config_destroy(&r.c);
		return rc;
	}
	bfs_s3_config_destroy(cfg);
	*cfg = r.c;
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
