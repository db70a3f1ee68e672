/* SPDX-License-Identifier: Apache-2.0 */
/* credawsutil.c — what the AWS credential providers share (credaws_impl.h):
 * small strings, token files, the JSON credentials of IMDS, the container
 * endpoint and credential_process, URLs and headers of their requests, the
 * "looked in" line of the chain. */
#include "credaws_impl.h"

#include "cjson.h"
#include "common.h"
#include "http.h"
#include "s3sign.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

bool bfs_credaws_truthy(const char *v)
{
	return v && strcasecmp(v, "true") == 0;
}

char *bfs_credaws_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

void bfs_credaws_free_wiped(char *p)
{
	if (p) {
		explicit_bzero(p, strlen(p));
		free(p);
	}
}

/* ---- reading small files (token files) ---- */

int bfs_credaws_read_small(const char *path, size_t max, char **out, char *why, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct bfs_s3_str s = { .max = max };
	char buf[4096];
	ssize_t n;

	if (fd < 0) {
		snprintf(why, cap, "cannot read %s: %s", path, strerror(errno));
		return errno == ENOENT ? -ENOENT : -EIO;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		bfs_s3_str_add(&s, buf, (size_t)n);
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	if (n < 0 || s.err) {
		snprintf(why, cap, "cannot read %s: %s", path,
			 n < 0		   ? strerror(errno)
			 : s.err == -EFBIG ? "too large"
					   : "out of memory");
		if (s.p)
			explicit_bzero(s.p, s.cap);
		bfs_s3_str_free(&s);
		return -EIO;
	}
	if (bfs_s3_str_take(&s, out)) {
		snprintf(why, cap, "out of memory");
		return -ENOMEM;
	}
	/* a token ends at the first blank or newline */
	(*out)[strcspn(*out, " \t\r\n")] = '\0';
	if (!**out) {
		free(*out);
		snprintf(why, cap, "%s is empty", path);
		return -EIO;
	}
	return 0;
}

/* ---- JSON credentials (IMDS, the container endpoint, credential_process) ---- */

/* Credentials from a parsed JSON object o (NULL: the document was not
 * one): AccessKeyId, SecretAccessKey, the token under token_key,
 * Expiration (required unless optional_expiry). Wipes o's secrets and frees
 * it. */
int bfs_credaws_json_creds(struct bfs_cjson *o, const char *token_key, bool optional_expiry,
			   const char *source, const char *account, struct bfs_cred **out,
			   char *why, size_t cap)
{
	const char *id, *secret, *token, *exp, *code;
	time_t expires = 0;
	int rc;

	if (!o) {
		snprintf(why, cap, "the answer is not a JSON object");
		return -EIO;
	}
	code = bfs_cjson_str(o, "Code", NULL);
	id = bfs_cjson_str(o, "AccessKeyId", NULL);
	secret = bfs_cjson_str(o, "SecretAccessKey", NULL);
	token = bfs_cjson_str(o, token_key, NULL);
	exp = bfs_cjson_str(o, "Expiration", NULL);
	if (code && strcmp(code, "Success") != 0) {
		snprintf(why, cap, "the answer's Code is %.60s", code);
		rc = -EIO;
	} else if (!id || !*id || !secret || !*secret) {
		snprintf(why, cap, "the answer has no AccessKeyId or SecretAccessKey");
		rc = -EIO;
	} else if ((!exp && !optional_expiry) || (exp && bfs_cred_parse_time(exp, &expires))) {
		snprintf(why, cap, "the answer has %s Expiration", exp ? "a bad" : "no");
		rc = -EIO;
	} else {
		rc = bfs_cred_new(out, BFS_CRED_SIGV4, id, secret, token, expires, source, account);
		if (rc)
			snprintf(why, cap, "%s",
				 rc == -ENOMEM ? "out of memory" : "the answer has a bad field");
		if (rc == -EINVAL)
			rc = -EIO;
	}
	bfs_cjson_wipe(o, "SecretAccessKey");
	bfs_cjson_wipe(o, token_key);
	bfs_cjson_free(o);
	return rc;
}

/* body[0..len) parsed as a JSON object, or NULL (not one: bfs_credaws_json_creds says
 * so; out of memory: the same, as jansson's json_loadb did). */
struct bfs_cjson *bfs_credaws_json_object(const char *body, size_t len)
{
	struct bfs_cjson *o;
	char w[128];

	return bfs_cjson_parse(&o, body, len, 0, "the answer", w, sizeof(w)) ? NULL : o;
}

/* ---- HTTP helpers ---- */

/* An error of bfs_http_request as the chain sees it: nothing listening is
 * "not here" (-ENOENT), the rest "there, but failing" (-EIO). */
int bfs_credaws_http_errno(int rc)
{
	return rc == -EHOSTUNREACH || rc == -ETIMEDOUT ? -ENOENT : rc == -ENOMEM ? rc : -EIO;
}

/* host[:port] and path of an http(s) URL, for the signature. */
int bfs_credaws_url_split(const char *url, char *host, size_t hcap, const char **path)
{
	const char *a, *end;
	size_t n;
	bool https = strncasecmp(url, "https://", 8) == 0;

	if (https)
		a = url + 8;
	else if (strncasecmp(url, "http://", 7) == 0)
		a = url + 7;
	else
		return -EINVAL;
	end = strchr(a, '/');
	n = end ? (size_t)(end - a) : strlen(a);
	if (n == 0 || n >= hcap || memchr(a, '@', n))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		host[i] = (char)tolower((unsigned char)a[i]);
	host[n] = '\0';
	if ((https && n > 4 && strcmp(host + n - 4, ":443") == 0) ||
	    (!https && n > 3 && strcmp(host + n - 3, ":80") == 0))
		*strrchr(host, ':') = '\0';
	*path = end ? end : "/";
	return 0;
}

void bfs_credaws_form_add(struct bfs_s3_str *b, const char *name, const char *value)
{
	char *enc = NULL;

	if (b->n)
		bfs_s3_str_addc(b, '&');
	bfs_s3_str_adds(b, name);
	bfs_s3_str_addc(b, '=');
	if (bfs_s3_uri_encode(&enc, value, false)) {
		b->err = -ENOMEM;
		return;
	}
	bfs_s3_str_adds(b, enc);
	explicit_bzero(enc, strlen(enc));
	free(enc);
}

char *bfs_credaws_hdr(const char *name, const char *value)
{
	size_t n = strlen(name) + strlen(value) + 3;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s: %s", name, value);
	return p;
}

/* The role's name from its ARN (arn:aws:iam::123:role/path/NAME). */
const char *bfs_credaws_role_name(const char *arn)
{
	const char *s = strrchr(arn, '/');

	return s ? s + 1 : arn;
}

char *bfs_credaws_session_name(const char *given)
{
	char buf[64];

	if (given)
		return strdup(given);
	snprintf(buf, sizeof(buf), "batchfs-%lld", (long long)time(NULL));
	return strdup(buf);
}

/* ---- the chain's "looked in" line ---- */

void bfs_credaws_looked(struct chain *ch, const char *fmt, ...)
{
	char buf[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (ch->looked.n)
		bfs_s3_str_adds(&ch->looked, ", ");
	bfs_s3_str_adds(&ch->looked, buf);
}
