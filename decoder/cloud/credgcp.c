/* SPDX-License-Identifier: Apache-2.0 */
/* credgcp.c — Google's Application Default Credentials: the key files (read
 * by cjson.c), the JWT assertion (signed by sha256.c's RS256) and the token
 * requests and replies, without I/O but the reading of the files. See
 * credgcp.h; the provider is in credgcptoken.c, the chain in
 * credgcpchain.c. */
#include "credgcp.h"

#include "credgcp_impl.h"

#include "cjson.h"
#include "common.h"
#include "cred.h"
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

void bfs_credgcp_free_secret(char **p)
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
	bfs_credgcp_free_secret(&s->private_key);
	free(s->client_id);
	bfs_credgcp_free_secret(&s->client_secret);
	bfs_credgcp_free_secret(&s->refresh_token);
	free(s->metadata_host);
	memset(s, 0, sizeof(*s));
}

int bfs_credgcp_dup_to(char **dst, const char *v)
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
	return bfs_credgcp_dup_to(dst, v);
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
	if (!s.token_uri && (rc = bfs_credgcp_dup_to(&s.token_uri, BFS_GCP_TOKEN_URI)))
		goto out;
	if (!http_url(s.token_uri)) {
		rc = bfs_err_set(-EINVAL, "%s: \"token_uri\" is not an http:// or https:// URL",
				 path);
		goto out;
	}
	if ((rc = bfs_credgcp_dup_to(&s.path, path)))
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
	bfs_credgcp_free_secret(&sig64);
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
		bfs_credgcp_free_secret(&jwt);
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
	if ((rc = bfs_credgcp_dup_to(url, s->token_uri))) {
		bfs_credgcp_free_secret(body);
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
