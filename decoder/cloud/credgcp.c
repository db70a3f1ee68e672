/* SPDX-License-Identifier: Apache-2.0 */
/* credgcp.c — Google's Application Default Credentials: the chain, the key
 * files (read by cjson.c), the JWT assertion (signed by sha256.c's RS256) and the
 * token requests and replies. See credgcp.h. */
#include "credgcp.h"

#include "cjson.h"
#include "common.h"
#include "cred.h"
#include "http.h"
#include "sha256.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void free_secret(char **p)
{
	if (*p) {
		explicit_bzero(*p, strlen(*p));
		free(*p);
		*p = NULL;
	}
}

void bfs_gcp_source_destroy(struct bfs_gcp_source *s)
{
	if (!s)
		return;
	free(s->path);
	free(s->via);
	free(s->token_uri);
	free(s->client_email);
	free(s->private_key_id);
	free_secret(&s->private_key);
	free(s->client_id);
	free_secret(&s->client_secret);
	free_secret(&s->refresh_token);
	free(s->metadata_host);
	memset(s, 0, sizeof(*s));
}

/* An environment variable, NULL when unset or empty. */
static int dup_to(char **dst, const char *v)
{
	*dst = strdup(v);
	return *dst ? 0 : bfs_err_set(-ENOMEM, "out of memory");
}

/* ---- the key files ---- */

/* Field `name` of o as a string: *dst a copy; NULL (and 0) when absent and
 * !required. */
static int field(char **dst, const struct bfs_cjson *o, const char *name, bool required,
		 const char *path, const char *type)
{
	const char *v;
	size_t len = 0;

	*dst = NULL;
	if (!bfs_cjson_has(o, name)) {
		if (!required)
			return 0;
		return bfs_err_set(-EINVAL, "%s: the %s file has no \"%s\"", path, type, name);
	}
	v = bfs_cjson_str(o, name, &len);
	if (!v || len == 0 || strlen(v) != len)
		return bfs_err_set(-EINVAL, "%s: \"%s\" is not a string (or is empty)", path, name);
	return dup_to(dst, v);
}

static bool http_url(const char *u)
{
	return strncasecmp(u, "https://", 8) == 0 || strncasecmp(u, "http://", 7) == 0;
}

int bfs_gcp_source_parse(struct bfs_gcp_source *out, const char *path, const char *text, size_t n)
{
	struct bfs_gcp_source s = { 0 };
	struct bfs_cjson *root = NULL;
	const char *type;
	char why[PATH_MAX + 64];
	int rc;

	/* the line names where the error is, never the file's text (a secret) */
	rc = bfs_cjson_parse(&root, text, n, BFS_CJSON_NO_DUPLICATES, path, why, sizeof(why));
	if (rc)
		return bfs_err_set(rc == -ENOMEM ? -ENOMEM : -EINVAL, "%s", why);
	type = bfs_cjson_str(root, "type", NULL);
	if (!type) {
		rc = bfs_err_set(-EINVAL, "%s: no \"type\" (a Google credentials file has one)",
				 path);
		goto out;
	}
	if (strcmp(type, "service_account") == 0) {
		s.kind = BFS_GCP_SERVICE_ACCOUNT;
		if ((rc = field(&s.client_email, root, "client_email", true, path, type)) ||
		    (rc = field(&s.private_key, root, "private_key", true, path, type)) ||
		    (rc = field(&s.private_key_id, root, "private_key_id", false, path, type)) ||
		    (rc = field(&s.token_uri, root, "token_uri", false, path, type)))
			goto out;
		if (!strstr(s.private_key, "-----BEGIN ")) {
			rc = bfs_err_set(-EINVAL, "%s: \"private_key\" is not a PEM key", path);
			goto out;
		}
	} else if (strcmp(type, "authorized_user") == 0) {
		s.kind = BFS_GCP_AUTHORIZED_USER;
		if ((rc = field(&s.client_id, root, "client_id", true, path, type)) ||
		    (rc = field(&s.client_secret, root, "client_secret", true, path, type)) ||
		    (rc = field(&s.refresh_token, root, "refresh_token", true, path, type)) ||
		    (rc = field(&s.token_uri, root, "token_uri", false, path, type)))
			goto out;
	} else {
		bool known = strcmp(type, "external_account") == 0 ||
			     strcmp(type, "impersonated_service_account") == 0 ||
			     strcmp(type, "external_account_authorized_user") == 0 ||
			     strcmp(type, "gdch_service_account") == 0;

		rc = bfs_err_set(-EINVAL,
				 "%s: \"type\": \"%.60s\" credentials are %s by batchfs (it "
				 "reads service_account keys and authorized_user files; run "
				 "`gcloud auth application-default login`, or use a "
				 "service-account key, HMAC keys or the metadata server)",
				 path, type, known ? "not supported" : "unknown");
		goto out;
	}
	if (!s.token_uri && (rc = dup_to(&s.token_uri, BFS_GCP_TOKEN_URI)))
		goto out;
	if (!http_url(s.token_uri)) {
		rc = bfs_err_set(-EINVAL, "%s: \"token_uri\" is not an http:// or https:// URL",
				 path);
		goto out;
	}
	if ((rc = dup_to(&s.path, path)))
		goto out;
	*out = s;
	memset(&s, 0, sizeof(s));
	rc = 0;
out:
	bfs_gcp_source_destroy(&s);
	if (root) {
		bfs_cjson_wipe(root, "private_key");
		bfs_cjson_wipe(root, "client_secret");
		bfs_cjson_wipe(root, "refresh_token");
	}
	bfs_cjson_free(root);
	return rc;
}

int bfs_gcp_source_load(struct bfs_gcp_source *out, const char *path)
{
	FILE *f = fopen(path, "r");
	char *text;
	size_t n;
	int rc;

	if (!f) {
		int e = errno;

		return bfs_err_set(e == ENOENT || e == ENOTDIR ? -ENOENT : -EACCES,
				   "cannot read %s: %s", path, strerror(e));
	}
	text = malloc(BFS_GCP_KEY_FILE_MAX + 1);
	if (!text) {
		fclose(f);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	n = fread(text, 1, BFS_GCP_KEY_FILE_MAX + 1, f);
	rc = ferror(f);
	fclose(f);
	if (rc || n > BFS_GCP_KEY_FILE_MAX)
		rc = bfs_err_set(-EINVAL, "cannot read %s: %s", path,
				 rc ? "read error" : "larger than 1 MiB");
	else
		rc = bfs_gcp_source_parse(out, path, text, n);
	explicit_bzero(text, n);
	free(text);
	return rc;
}

/* ---- the chain ---- */

static const char *home_dir(char *buf, size_t cap)
{
	const char *home = bfs_env("HOME");
	struct passwd pw, *res = NULL;

	if (!home && getpwuid_r(getuid(), &pw, buf, cap, &res) == 0 && res)
		home = pw.pw_dir;
	return home ? home : "/";
}

int bfs_gcp_adc_find(struct bfs_gcp_source *out, char *looked, size_t cap)
{
	const char *gac = bfs_env("GOOGLE_APPLICATION_CREDENTIALS"),
		   *cfgdir = bfs_env("CLOUDSDK_CONFIG");
	/* GCE_METADATA_ROOT: the older name, which google-auth still reads */
	const char *host = bfs_env("GCE_METADATA_HOST") ? bfs_env("GCE_METADATA_HOST")
							: bfs_env("GCE_METADATA_ROOT");
	char path[4096], pwbuf[4096];
	struct bfs_gcp_source s = { 0 };
	int rc, n;

	memset(out, 0, sizeof(*out));
	if (gac) {
		if ((rc = bfs_gcp_source_load(&s, gac)))
			return rc == -ENOENT
				       ? bfs_err_set(-EINVAL,
						     "GOOGLE_APPLICATION_CREDENTIALS names %s, "
						     "which does not exist",
						     gac)
				       : rc;
		if ((rc = dup_to(&s.via, "GOOGLE_APPLICATION_CREDENTIALS"))) {
			bfs_gcp_source_destroy(&s);
			return rc;
		}
		*out = s;
		return 0;
	}
	if (cfgdir)
		n = snprintf(path, sizeof(path), "%s/application_default_credentials.json", cfgdir);
	else
		n = snprintf(path, sizeof(path),
			     "%s/.config/gcloud/application_default_credentials.json",
			     home_dir(pwbuf, sizeof(pwbuf)));
	if (n < 0 || (size_t)n >= sizeof(path))
		return bfs_err_set(-EINVAL, "%s: the path of the gcloud ADC file is too long",
				   cfgdir ? "CLOUDSDK_CONFIG" : "HOME");
	rc = bfs_gcp_source_load(&s, path);
	if (rc == 0) {
		if ((rc = dup_to(&s.via, "the gcloud ADC file"))) {
			bfs_gcp_source_destroy(&s);
			return rc;
		}
		*out = s;
		return 0;
	}
	if (rc != -ENOENT)
		return rc;
	s.kind = BFS_GCP_METADATA;
	if ((rc = dup_to(&s.metadata_host, host ? host : BFS_GCP_METADATA_HOST)) ||
	    (rc = dup_to(&s.via, host ? (bfs_env("GCE_METADATA_HOST") ? "GCE_METADATA_HOST"
								      : "GCE_METADATA_ROOT")
				      : "the metadata server"))) {
		bfs_gcp_source_destroy(&s);
		return rc;
	}
	if (looked)
		snprintf(looked, cap,
			 "GOOGLE_APPLICATION_CREDENTIALS (not set), %s (none), the metadata "
			 "server at %s",
			 path, s.metadata_host);
	*out = s;
	return 0;
}

/* ---- the assertion ---- */

int bfs_gcp_b64url(char **out, const void *p, size_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const uint8_t *b = p;
	size_t o = 0;
	char *s;

	if (n > (SIZE_MAX - 4) / 4 * 3)
		return bfs_err_set(-ENOMEM, "out of memory");
	s = malloc((n + 2) / 3 * 4 + 1);
	if (!s)
		return bfs_err_set(-ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)b[i] << 16;
		size_t left = n - i;

		if (left > 1)
			v |= (uint32_t)b[i + 1] << 8;
		if (left > 2)
			v |= b[i + 2];
		s[o++] = tab[(v >> 18) & 63];
		s[o++] = tab[(v >> 12) & 63];
		if (left > 1)
			s[o++] = tab[(v >> 6) & 63];
		if (left > 2)
			s[o++] = tab[v & 63];
	}
	s[o] = '\0';
	*out = s;
	return 0;
}

/* base64url of the compact JSON text of the object of the n members m. */
static int b64_json(char **out, const struct bfs_cjson_member *m, size_t n)
{
	char *text;
	int rc;

	rc = bfs_cjson_object_text(&text, m, n);
	if (rc)
		return bfs_err_set(rc, "%s",
				   rc == -ENOMEM ? "out of memory"
						 : "the JWT's fields are not UTF-8 text");
	rc = bfs_gcp_b64url(out, text, strlen(text));
	free(text);
	return rc;
}

int bfs_gcp_jwt(char **out, const struct bfs_gcp_source *s, const char *scope, int64_t now)
{
	char *head = NULL, *claims = NULL, *sig64 = NULL, *input = NULL, *jwt = NULL;
	uint8_t *sig = NULL;
	size_t siglen = 0, n;
	int rc;

	*out = NULL;
	if (s->kind != BFS_GCP_SERVICE_ACCOUNT || !s->private_key || !s->client_email ||
	    !s->token_uri)
		return bfs_err_set(-EINVAL, "not a service-account key");
	{
		const struct bfs_cjson_member h[] = {
			{ "alg", "RS256", 0 },
			{ "typ", "JWT", 0 },
			{ "kid", s->private_key_id, 0 },
		};
		const struct bfs_cjson_member c[] = {
			{ "iss", s->client_email, 0 },
			{ "scope", scope, 0 },
			{ "aud", s->token_uri, 0 },
			{ "iat", NULL, now },
			{ "exp", NULL, now + BFS_GCP_JWT_LIFETIME },
		};

		if ((rc = b64_json(&head, h, s->private_key_id ? 3 : 2)) ||
		    (rc = b64_json(&claims, c, sizeof(c) / sizeof(c[0]))))
			goto out;
	}
	n = strlen(head) + strlen(claims) + 2;
	input = malloc(n);
	if (!input) {
		rc = bfs_err_set(-ENOMEM, "out of memory");
		goto out;
	}
	snprintf(input, n, "%s.%s", head, claims);
	rc = bfs_rs256_sign(&sig, &siglen, s->private_key, strlen(s->private_key), input,
			    strlen(input));
	if (rc) {
		rc = rc == -ENOMEM ? bfs_err_set(rc, "out of memory")
				   : bfs_err_set(rc,
						 "%s: \"private_key\" is not an RSA private key "
						 "libcrypto can load (PEM, no passphrase)",
						 s->path ? s->path : "the key");
		goto out;
	}
	if ((rc = bfs_gcp_b64url(&sig64, sig, siglen)))
		goto out;
	n = strlen(input) + strlen(sig64) + 2;
	jwt = malloc(n);
	if (!jwt) {
		rc = bfs_err_set(-ENOMEM, "out of memory");
		goto out;
	}
	snprintf(jwt, n, "%s.%s", input, sig64);
	*out = jwt;
	rc = 0;
out:
	free(head);
	free(claims);
	free(input);
	if (sig) {
		explicit_bzero(sig, siglen);
		free(sig);
	}
	free_secret(&sig64);
	return rc;
}

/* ---- the requests ---- */

/* Append v %-encoded as application/x-www-form-urlencoded wants it. */
static void form_add(char *dst, size_t *o, const char *v)
{
	static const char hex[] = "0123456789ABCDEF";

	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		if (isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
			dst[(*o)++] = (char)*p;
		} else {
			dst[(*o)++] = '%';
			dst[(*o)++] = hex[*p >> 4];
			dst[(*o)++] = hex[*p & 15];
		}
	}
}

/* "k1=v1&k2=v2..." of n pairs, each value encoded. */
static int form(char **out, const char *const *kv, size_t n)
{
	size_t len = 1, o = 0;
	char *s;

	for (size_t i = 0; i < 2 * n; i++)
		len += 3 * strlen(kv[i]) + 2;
	s = malloc(len);
	if (!s)
		return bfs_err_set(-ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		if (i)
			s[o++] = '&';
		form_add(s, &o, kv[2 * i]);
		s[o++] = '=';
		form_add(s, &o, kv[2 * i + 1]);
	}
	s[o] = '\0';
	*out = s;
	return 0;
}

int bfs_gcp_token_request(const struct bfs_gcp_source *s, int64_t now, char **url, char **body)
{
	char *jwt = NULL;
	int rc;

	*url = *body = NULL;
	switch (s->kind) {
	case BFS_GCP_SERVICE_ACCOUNT: {
		if ((rc = bfs_gcp_jwt(&jwt, s, BFS_GCP_SCOPE, now)))
			return rc;
		const char *kv[] = { "grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer",
				     "assertion", jwt };

		rc = form(body, kv, 2);
		free_secret(&jwt);
		break;
	}
	case BFS_GCP_AUTHORIZED_USER: {
		const char *kv[] = { "grant_type",    "refresh_token", "client_id",
				     s->client_id,    "client_secret", s->client_secret,
				     "refresh_token", s->refresh_token };

		rc = form(body, kv, 4);
		break;
	}
	case BFS_GCP_METADATA: {
		size_t n = strlen(s->metadata_host) + sizeof(BFS_GCP_METADATA_PATH) + 16;

		*url = malloc(n);
		if (!*url)
			return bfs_err_set(-ENOMEM, "out of memory");
		snprintf(*url, n, "%s%s%s",
			 strncmp(s->metadata_host, "http://", 7) == 0 ? "" : "http://",
			 s->metadata_host, BFS_GCP_METADATA_PATH);
		return 0;
	}
	default:
		return bfs_err_set(-EINVAL, "no Google credentials");
	}
	if (rc)
		return rc;
	if ((rc = dup_to(url, s->token_uri))) {
		free_secret(body);
		return rc;
	}
	return 0;
}

int bfs_gcp_token_parse(const char *body, size_t n, char **token, int64_t *expires_in, char *why,
			size_t cap)
{
	struct bfs_cjson *root = NULL;
	const char *tok, *type, *err, *desc, *exps;
	char w[128];
	int rc = -EBADMSG;

	*token = NULL;
	*expires_in = 0;
	if (bfs_cjson_parse(&root, body, n, 0, "the token reply", w, sizeof(w))) {
		snprintf(why, cap, "the token reply is not a JSON object");
		goto out;
	}
	tok = bfs_cjson_str(root, "access_token", NULL);
	type = bfs_cjson_str(root, "token_type", NULL);
	if (!tok || !*tok) {
		err = bfs_cjson_str(root, "error", NULL);
		desc = bfs_cjson_str(root, "error_description", NULL);
		/* Google's error codes and descriptions quote no secret */
		snprintf(why, cap, "the token reply has no access_token%s%.80s%s%.200s%s",
			 err ? " (error: " : "", err ? err : "", desc ? ": " : "", desc ? desc : "",
			 err ? ")" : "");
		goto out;
	}
	if (type && strcasecmp(type, "Bearer") != 0) {
		snprintf(why, cap, "the token reply's token_type is not Bearer");
		goto out;
	}
	for (const char *p = tok; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
			snprintf(why, cap, "the access token holds a blank or control character");
			goto out;
		}
	if (bfs_cjson_number(root, "expires_in", expires_in) != 0) {
		exps = bfs_cjson_str(root, "expires_in", NULL);
		*expires_in = exps ? strtoll(exps, NULL, 10) : 3600;
	}
	if (*expires_in <= 0) {
		snprintf(why, cap, "the token reply's expires_in is not a positive number");
		goto out;
	}
	*token = strdup(tok);
	if (!*token) {
		rc = -ENOMEM;
		snprintf(why, cap, "out of memory");
		goto out;
	}
	rc = 0;
out:
	if (root)
		bfs_cjson_wipe(root, "access_token");
	bfs_cjson_free(root);
	return rc;
}

void bfs_gcp_source_describe(const struct bfs_gcp_source *s, char *dst, size_t cap)
{
	switch (s->kind) {
	case BFS_GCP_SERVICE_ACCOUNT:
		snprintf(dst, cap, "service account %s (key file %s, from %s)", s->client_email,
			 s->path, s->via ? s->via : "?");
		break;
	case BFS_GCP_AUTHORIZED_USER:
		snprintf(dst, cap, "user credentials (%s, from %s)", s->path,
			 s->via ? s->via : "?");
		break;
	case BFS_GCP_METADATA:
		snprintf(dst, cap, "the metadata server at %s", s->metadata_host);
		break;
	default:
		snprintf(dst, cap, "none");
		break;
	}
}

/* ---- the provider and the chain (cred.h) ---- */

#define WHY_MAX 512

struct gcp_ctx {
	struct bfs_gcp_source src;
	char *ca_file;
	bool probing; /* the chain's first fetch: the metadata server may not be there */
	char source[1024]; /* for humans */
	char account[320]; /* the service account's email, when known */
};

static void gcp_ctx_free(void *p)
{
	struct gcp_ctx *c = p;

	if (!c)
		return;
	bfs_gcp_source_destroy(&c->src);
	free(c->ca_file);
	free(c);
}

/* What the token endpoint said, one line (its error fields only). */
static void refused_why(const struct gcp_ctx *c, const struct bfs_http_resp *r, const char *where,
			char *why, size_t cap)
{
	char *tok = NULL, detail[WHY_MAX];
	int64_t exp;

	detail[0] = '\0';
	if (bfs_gcp_token_parse(r->body, r->len, &tok, &exp, detail, sizeof(detail)) == 0) {
		free_secret(&tok);
		detail[0] = '\0';
	}
	/* "the token reply has no access_token (error: CODE: DESCRIPTION)":
	 * keep the error part, without the description when it quotes what
	 * looks like a JWT (an endpoint echoing the assertion) */
	{
		char *e = strstr(detail, "(error: "), *d;

		if (e && strstr(e, "eyJ") && (d = strstr(e + 8, ": ")))
			snprintf(d, sizeof(detail) - (size_t)(d - detail),
				 "; its description quoted the request, left out)");

		snprintf(why, cap, "%s answered HTTP %ld%s%s", where, r->status, e ? " " : "",
			 e ? e : "");
	}
	{
		const char *secrets[] = { c->src.client_secret, c->src.refresh_token };

		bfs_cred_scrub(why, cap, secrets, BFS_ARRAY_SIZE(secrets));
	}
}

/* Fetch an access token from c's place. See bfs_cred_fetch_fn. */
static int gcp_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap)
{
	struct gcp_ctx *c = ctx;
	const bool md = c->src.kind == BFS_GCP_METADATA;
	const char *form_hdr[] = { "Content-Type: application/x-www-form-urlencoded",
				   "Accept: application/json" };
	const char *md_hdr[] = { "Metadata-Flavor: Google" };
	struct bfs_http_req req = { 0 };
	struct bfs_http_resp resp = { 0 };
	char *url = NULL, *body = NULL, *tok = NULL, where[600], *q;
	int64_t now = bfs_cred_now_ms() / 1000, life = 0;
	int rc;

	*out = NULL;
	rc = bfs_gcp_token_request(&c->src, now, &url, &body);
	if (rc) {
		snprintf(why, cap, "%s", bfs_err_msg());
		return rc;
	}
	/* the URL without its query, for messages */
	q = strchr(url, '?');
	snprintf(where, sizeof(where), "%s %.*s", md ? "the metadata server" : "the token endpoint",
		 q ? (int)(q - url) : (int)strlen(url), url);
	req.method = body ? "POST" : "GET";
	req.url = url;
	req.headers = body ? form_hdr : md_hdr;
	req.nheaders = body ? BFS_ARRAY_SIZE(form_hdr) : BFS_ARRAY_SIZE(md_hdr);
	req.body = body;
	req.body_len = body ? strlen(body) : 0;
	req.max_body = 64 * 1024;
	req.ca_file = c->ca_file;
	if (md) {
		/* a laptop has none: find out quickly at the first fetch */
		req.connect_timeout_ms = 1000;
		if (c->probing) {
			req.tries = 2;
			req.retry_ms = 2000;
			req.timeout_ms = 3000;
		}
	}
	rc = bfs_http_request(&req, &resp, why, cap);
	free_secret(&body);
	if (rc) {
		if (md && c->probing && (rc == -EHOSTUNREACH || rc == -ETIMEDOUT)) {
			/* no metadata server here: the chain ends; the "looked in"
			 * line names the host already, keep curl's reason */
			size_t n = strlen(url);

			if (strncmp(why, url, n) == 0 && why[n] == ':' && why[n + 1] == ' ')
				memmove(why, why + n + 2, strlen(why + n + 2) + 1);
			rc = -ENOENT;
		} else if (rc != -ENOMEM && rc != -EINVAL)
			rc = -EIO;
		goto out;
	}
	if (resp.status != 200) {
		refused_why(c, &resp, where, why, cap);
		if (md && resp.status == 404)
			snprintf(why + strlen(why), cap - strlen(why),
				 " (the VM has no service account)");
		rc = resp.status >= 500 || resp.status == 429 ? -EIO : -EACCES;
		goto out;
	}
	{
		char detail[WHY_MAX];

		rc = bfs_gcp_token_parse(resp.body, resp.len, &tok, &life, detail, sizeof(detail));
		if (rc) {
			snprintf(why, cap, "%s: %s", where, detail);
			rc = rc == -ENOMEM ? rc : -EIO;
			goto out;
		}
	}
	rc = bfs_cred_new(out, BFS_CRED_BEARER, NULL, NULL, tok, (time_t)(now + life), c->source,
			  c->account[0] ? c->account : NULL);
	if (rc)
		snprintf(why, cap, "%s: %s", where,
			 rc == -ENOMEM ? "out of memory" : "an access token no header can carry");
out:
	free_secret(&tok);
	free(url);
	bfs_http_resp_free(&resp);
	return rc;
}

/* The VM's service account's email, for humans; "" when not known. */
static void metadata_email(struct gcp_ctx *c)
{
	char url[600], why[WHY_MAX];
	const char *hdr[] = { "Metadata-Flavor: Google" };
	struct bfs_http_req req = { .method = "GET",
				    .url = url,
				    .headers = hdr,
				    .nheaders = 1,
				    .max_body = 1024,
				    .tries = 1,
				    .connect_timeout_ms = 1000,
				    .timeout_ms = 2000 };
	struct bfs_http_resp resp = { 0 };

	snprintf(url, sizeof(url),
		 "%s%s/computeMetadata/v1/instance/service-accounts/default/email",
		 strncmp(c->src.metadata_host, "http://", 7) == 0 ? "" : "http://",
		 c->src.metadata_host);
	if (bfs_http_request(&req, &resp, why, sizeof(why)) == 0 && resp.status == 200 &&
	    resp.len > 0 && resp.len < sizeof(c->account) && !strpbrk(resp.body, " \t\r\n\"<>")) {
		snprintf(c->account, sizeof(c->account), "%s", resp.body);
		snprintf(c->source, sizeof(c->source),
			 "service account %s via the metadata server at %s", c->account,
			 c->src.metadata_host);
	}
	bfs_http_resp_free(&resp);
}

int bfs_credgcp_chain(struct bfs_cred_keeper **out, const char *ca_file, char *looked, size_t cap)
{
	struct bfs_cred_provider p = { .fetch = gcp_fetch, .ctx_free = gcp_ctx_free };
	struct bfs_cred *first = NULL;
	struct gcp_ctx *c;
	char places[2048] = "", why[WHY_MAX] = "";
	int rc;

	*out = NULL;
	if (looked && cap)
		looked[0] = '\0';
	c = calloc(1, sizeof(*c));
	if (!c)
		return bfs_err_set(-ENOMEM, "out of memory");
	if ((rc = bfs_gcp_adc_find(&c->src, places, sizeof(places)))) {
		gcp_ctx_free(c);
		return rc;
	}
	if (ca_file && !(c->ca_file = strdup(ca_file))) {
		gcp_ctx_free(c);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	bfs_gcp_source_describe(&c->src, c->source, sizeof(c->source));
	if (c->src.client_email)
		snprintf(c->account, sizeof(c->account), "%s", c->src.client_email);
	c->probing = true;
	rc = gcp_fetch(c, &first, why, sizeof(why));
	c->probing = false;
	if (rc == -ENOENT) {
		if (looked)
			snprintf(looked, cap, "%s (%s)", places, why);
		gcp_ctx_free(c);
		return -ENOENT;
	}
	if (rc) {
		rc = bfs_err_set(rc, "Google credentials from %s: %s", c->source, why);
		gcp_ctx_free(c);
		return rc;
	}
	if (c->src.kind == BFS_GCP_METADATA) {
		metadata_email(c);
		if (c->account[0]) { /* the first token, described again */
			struct bfs_cred *again = NULL;

			if (bfs_cred_new(&again, BFS_CRED_BEARER, NULL, NULL, first->token,
					 first->expires, c->source, c->account) == 0) {
				bfs_cred_unref(first);
				first = again;
			}
		}
	}
	p.name = c->source;
	p.ctx = c;
	rc = bfs_cred_keeper_new(out, &p, first);
	bfs_cred_unref(first);
	return rc;
}
