/* SPDX-License-Identifier: Apache-2.0 */
/* credaws.c — the AWS default credential chain, in botocore's order (see
 * cred.h, bfs_credaws_chain, and docs/buckets.md):
 *
 *   1. the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 *      AWS_SESSION_TOKEN;
 *   2. the profile's role_arn with source_profile or credential_source:
 *      STS AssumeRole, signed with the source's credentials;
 *   3. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+
 *      AWS_ROLE_SESSION_NAME), or the profile's web_identity_token_file +
 *      role_arn: STS AssumeRoleWithWebIdentity (unsigned, the token in the
 *      body, the file read again at each refresh: it rotates);
 *   4. SSO profiles (sso_session, sso_start_url): refused with a line saying
 *      that their token cache (aws sso login) is out of scope;
 *   5. the credentials file's keys, 6. credential_process, 7. the config
 *      file's keys (the profile: AWS_PROFILE or "default"; the files:
 *      AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE);
 *   8. container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (on
 *      169.254.170.2) or _FULL_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE
 *      or AWS_CONTAINER_AUTHORIZATION_TOKEN;
 *   9. the instance metadata service, IMDSv2 (a session token first; IMDSv1
 *      only when the token request is refused with 403, 404 or 405):
 *      AWS_EC2_METADATA_DISABLED, AWS_EC2_METADATA_SERVICE_ENDPOINT,
 *      AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE, AWS_EC2_METADATA_V1_DISABLED,
 *      AWS_METADATA_SERVICE_TIMEOUT, AWS_METADATA_SERVICE_NUM_ATTEMPTS.
 *
 * STS is reached at AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else the
 * regional endpoint (https://sts.REGION.amazonaws.com), else the global one.
 * Every request goes through bfs_http_request (http.c); STS's XML is parsed by
 * s3xml.c; JSON (IMDS, the container endpoint, credential_process) by
 * cjson.c.
 */
#include "credaws.h"

#include "cjson.h"
#include "common.h"
#include "cred.h"
#include "http.h"
#include "s3ini.h"
#include "s3str.h"
#include "s3sign.h"
#include "s3xml.h"
#include "sha256.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define WHY 512
#define MAX_DEPTH 5 /* role_arn -> source_profile chains */
#define MAX_TOKEN_FILE (64u * 1024)
#define MAX_PROCESS_OUT (64u * 1024)
#define PROCESS_TIMEOUT_MS (60 * 1000)
#define CONTAINER_HOST "http://169.254.170.2"
#define IMDS_DEFAULT "http://169.254.169.254"
#define IMDS_DEFAULT6 "http://[fd00:ec2::254]"
#define IMDS_TTL "21600"

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static bool truthy(const char *v)
{
	return v && strcasecmp(v, "true") == 0;
}

static char *xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void free_wiped(char *p)
{
	if (p) {
		explicit_bzero(p, strlen(p));
		free(p);
	}
}

/* ---- reading small files (token files) ---- */

static int read_small(const char *path, size_t max, char **out, char *why, size_t cap)
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
static int json_creds(struct bfs_cjson *o, const char *token_key, bool optional_expiry,
		      const char *source, const char *account, struct bfs_cred **out, char *why,
		      size_t cap)
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

/* body[0..len) parsed as a JSON object, or NULL (not one: json_creds says
 * so; out of memory: the same, as jansson's json_loadb did). */
static struct bfs_cjson *json_object_of(const char *body, size_t len)
{
	struct bfs_cjson *o;
	char w[128];

	return bfs_cjson_parse(&o, body, len, 0, "the answer", w, sizeof(w)) ? NULL : o;
}

/* ---- static credentials ---- */

static int static_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap)
{
	(void)why;
	(void)cap;
	*out = bfs_cred_ref(ctx);
	return 0;
}

static void static_free(void *ctx)
{
	bfs_cred_unref(ctx);
}

static int static_provider(struct bfs_cred_provider *p, struct bfs_cred *c)
{
	*p = (struct bfs_cred_provider){
		.name = c->source, .fetch = static_fetch, .ctx = c, .ctx_free = static_free
	};
	return 0;
}

/* ---- HTTP helpers ---- */

struct http_ctx {
	const char *ca;
	unsigned tries, connect_ms, timeout_ms;
};

/* An error of bfs_http_request as the chain sees it: nothing listening is
 * "not here" (-ENOENT), the rest "there, but failing" (-EIO). */
static int http_errno(int rc)
{
	return rc == -EHOSTUNREACH || rc == -ETIMEDOUT ? -ENOENT : rc == -ENOMEM ? rc : -EIO;
}

/* ---- STS ---- */

struct sts {
	char *url; /* the endpoint, normal form, no '/' at the end */
	char *region; /* for the signature */
	char *ca;
};

static void sts_destroy(struct sts *s)
{
	free(s->url);
	s->url = NULL;
	free(s->region);
	s->region = NULL;
	free(s->ca);
	s->ca = NULL;
}

static int sts_init(struct sts *s, const char *region, const char *ca)
{
	const char *ep = env("AWS_ENDPOINT_URL_STS");
	char buf[160];
	size_t n;

	memset(s, 0, sizeof(*s));
	if (!ep)
		ep = env("AWS_ENDPOINT_URL");
	if (!ep) {
		if (region && strcmp(region, "us-east-1") != 0 && strcmp(region, "aws-global") != 0)
			snprintf(buf, sizeof(buf), "https://sts.%s.amazonaws.com%s", region,
				 strncmp(region, "cn-", 3) == 0 ? ".cn" : "");
		else
			snprintf(buf, sizeof(buf), "https://sts.amazonaws.com");
		ep = buf;
	}
	s->url = strdup(ep);
	s->region = strdup(region ? region : "us-east-1");
	s->ca = xstrdup(ca);
	if (!s->url || !s->region || (ca && !s->ca)) {
		sts_destroy(s);
		return -ENOMEM;
	}
	n = strlen(s->url);
	while (n && s->url[n - 1] == '/')
		s->url[--n] = '\0';
	return 0;
}

/* host[:port] and path of an http(s) URL, for the signature. */
static int url_split(const char *url, char *host, size_t hcap, const char **path)
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

static void form_add(struct bfs_s3_str *b, const char *name, const char *value)
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

static char *hdr(const char *name, const char *value)
{
	size_t n = strlen(name) + strlen(value) + 3;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s: %s", name, value);
	return p;
}

static const char sts_ctype[] = "application/x-www-form-urlencoded; charset=utf-8";

/* The SigV4 headers of the POST of form to STS, signed with signer, added
 * to h[*nh...] (NULL where out of memory: the caller checks). */
static int sts_sign(const struct sts *s, const char *form, const struct bfs_cred *signer, char **h,
		    size_t *nh, char *why, size_t cap)
{
	struct bfs_s3_kv extra[1] = { { "content-type", sts_ctype } };
	uint8_t d[BFS_SHA256_LEN];
	char hash[2 * BFS_SHA256_LEN + 1], host[300];
	const char *path;
	struct bfs_s3_signed sig = { 0 };
	struct bfs_s3_creds cr = { signer->key_id, signer->secret, signer->token };
	struct bfs_s3_sigreq sr = { .method = "POST",
				    .host = host,
				    .headers = extra,
				    .nheaders = 1,
				    .payload_hash = hash,
				    .region = s->region,
				    .service = "sts",
				    .when = time(NULL) };
	int rc;

	if (url_split(s->url, host, sizeof(host), &path)) {
		snprintf(why, cap, "STS endpoint %.200s: not an http(s) URL", s->url);
		return -EINVAL;
	}
	sr.path = path;
	bfs_sha256_digest(d, form, strlen(form));
	bfs_sha256_hex(hash, d);
	rc = bfs_s3_sign(&sig, &sr, &cr);
	if (rc) {
		snprintf(why, cap, "cannot sign the STS request");
		return rc;
	}
	h[(*nh)++] = hdr("X-Amz-Date", sig.amz_date);
	h[(*nh)++] = hdr("X-Amz-Content-Sha256", sig.content_sha256);
	if (signer->token)
		h[(*nh)++] = hdr("X-Amz-Security-Token", signer->token);
	h[(*nh)++] = hdr("Authorization", sig.authorization);
	explicit_bzero(&sig, sizeof(sig));
	return 0;
}

/* STS's answer resp (parsed into x) to `action`: the credentials in *out,
 * or why not. */
static int sts_answer(const char *action, const struct bfs_http_resp *resp, struct bfs_s3xml_sts *x,
		      const char *source, const char *account, struct bfs_cred **out, char *why,
		      size_t cap)
{
	char hw[WHY];
	time_t exp;
	int rc = bfs_s3xml_parse_sts(x, resp->body, resp->len, hw, sizeof(hw));

	if (rc == 0 && x->is_error) {
		snprintf(why, cap, "STS %s refused (HTTP %ld): %s: %s", action, resp->status,
			 x->code, x->message);
		return resp->status >= 500 ? -EIO : -EACCES;
	}
	if (rc == 0 && resp->status != 200) {
		snprintf(why, cap, "STS %s answered HTTP %ld", action, resp->status);
		return -EIO;
	}
	if (rc) {
		snprintf(why, cap, "STS %s (HTTP %ld): the answer does not parse: %s", action,
			 resp->status, hw);
		return rc == -ENOMEM ? rc : -EIO;
	}
	if (bfs_cred_parse_time(x->expiration, &exp)) {
		snprintf(why, cap, "STS %s: a bad Expiration", action);
		return -EIO;
	}
	rc = bfs_cred_new(out, BFS_CRED_SIGV4, x->key_id, x->secret, x->token, exp, source,
			  account);
	if (rc)
		snprintf(why, cap, "STS %s: %s", action,
			 rc == -ENOMEM ? "out of memory" : "a bad field in the answer");
	return rc == -EINVAL ? -EIO : rc;
}

/* POST the form to STS, signed with signer (NULL: unsigned), and parse the
 * answer into creds. */
static int sts_call(const struct sts *s, const char *action, const char *form,
		    const struct bfs_cred *signer, const char *source, const char *account,
		    struct bfs_cred **out, char *why, size_t cap)
{
	struct bfs_http_req req = { .method = "POST",
				    .url = s->url,
				    .body = form,
				    .body_len = strlen(form),
				    .max_body = 64 * 1024,
				    .ca_file = s->ca };
	struct bfs_http_resp resp = { 0 };
	struct bfs_s3xml_sts x = { 0 };
	char *h[6] = { 0 }, hw[WHY];
	size_t nh = 0;
	int rc = 0;

	h[nh++] = hdr("Content-Type", sts_ctype);
	if (signer)
		rc = sts_sign(s, form, signer, h, &nh, why, cap);
	if (rc)
		goto out;
	for (size_t i = 0; i < nh; i++)
		if (!h[i]) {
			rc = -ENOMEM;
			snprintf(why, cap, "out of memory");
			goto out;
		}
	req.headers = (const char *const *)h;
	req.nheaders = nh;
	rc = bfs_http_request(&req, &resp, hw, sizeof(hw));
	if (rc) {
		snprintf(why, cap, "STS %s: %s", action, hw);
		rc = rc == -ENOMEM ? rc : -EIO;
		goto out;
	}
	rc = sts_answer(action, &resp, &x, source, account, out, why, cap);
out:
	bfs_s3xml_sts_destroy(&x);
	bfs_http_resp_free(&resp);
	for (size_t i = 0; i < nh; i++)
		free_wiped(h[i]);
	if (rc) { /* an echo of what was sent is no line of ours */
		const char *secrets[] = { signer ? signer->secret : NULL,
					  signer ? signer->token : NULL };

		bfs_cred_scrub(why, cap, secrets, 2);
	}
	return rc;
}

/* The role's name from its ARN (arn:aws:iam::123:role/path/NAME). */
static const char *role_name(const char *arn)
{
	const char *s = strrchr(arn, '/');

	return s ? s + 1 : arn;
}

static char *session_name(const char *given)
{
	char buf[64];

	if (given)
		return strdup(given);
	snprintf(buf, sizeof(buf), "batchfs-%lld", (long long)time(NULL));
	return strdup(buf);
}

/* ---- AssumeRole (a profile's role_arn) ---- */

struct assume {
	struct sts sts;
	char *role_arn, *session, *external_id, *duration;
	char *source_desc; /* "source_profile 'base'" */
	struct bfs_cred_provider src; /* the source's credentials */
	char *desc;
};

static void assume_free(void *ctx)
{
	struct assume *a = ctx;

	if (!a)
		return;
	sts_destroy(&a->sts);
	free(a->role_arn);
	free(a->session);
	free(a->external_id);
	free(a->duration);
	free(a->source_desc);
	free(a->desc);
	if (a->src.ctx_free)
		a->src.ctx_free(a->src.ctx);
	free(a);
}

static int assume_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap)
{
	struct assume *a = ctx;
	struct bfs_cred *src = NULL;
	struct bfs_s3_str form = { 0 };
	char w[WHY];
	char *body = NULL;
	int rc;

	rc = a->src.fetch(a->src.ctx, &src, w, sizeof(w));
	if (rc) {
		snprintf(why, cap, "the source credentials (%s): %s", a->source_desc, w);
		return rc;
	}
	form_add(&form, "Action", "AssumeRole");
	form_add(&form, "Version", "2011-06-15");
	form_add(&form, "RoleArn", a->role_arn);
	form_add(&form, "RoleSessionName", a->session);
	if (a->duration)
		form_add(&form, "DurationSeconds", a->duration);
	if (a->external_id)
		form_add(&form, "ExternalId", a->external_id);
	if (bfs_s3_str_take(&form, &body)) {
		bfs_cred_unref(src);
		snprintf(why, cap, "out of memory");
		return -ENOMEM;
	}
	rc = sts_call(&a->sts, "AssumeRole", body, src, a->desc, role_name(a->role_arn), out, why,
		      cap);
	free_wiped(body);
	bfs_cred_unref(src);
	return rc;
}

/* ---- AssumeRoleWithWebIdentity ---- */

struct webid {
	struct sts sts;
	char *token_file, *role_arn, *session;
	char *desc;
};

static void webid_free(void *ctx)
{
	struct webid *w = ctx;

	if (!w)
		return;
	sts_destroy(&w->sts);
	free(w->token_file);
	free(w->role_arn);
	free(w->session);
	free(w->desc);
	free(w);
}

static int webid_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap)
{
	struct webid *w = ctx;
	struct bfs_s3_str form = { 0 };
	char *tok = NULL, *body = NULL;
	int rc;

	rc = read_small(w->token_file, MAX_TOKEN_FILE, &tok, why, cap);
	if (rc)
		return rc == -ENOENT ? -EIO : rc; /* named, so there: a missing file is an error */
	form_add(&form, "Action", "AssumeRoleWithWebIdentity");
	form_add(&form, "Version", "2011-06-15");
	form_add(&form, "RoleArn", w->role_arn);
	form_add(&form, "RoleSessionName", w->session);
	form_add(&form, "WebIdentityToken", tok);
	if (bfs_s3_str_take(&form, &body)) {
		free_wiped(tok);
		snprintf(why, cap, "out of memory");
		return -ENOMEM;
	}
	rc = sts_call(&w->sts, "AssumeRoleWithWebIdentity", body, NULL, w->desc,
		      role_name(w->role_arn), out, why, cap);
	if (rc) {
		const char *secrets[] = { tok };

		bfs_cred_scrub(why, cap, secrets, 1);
	}
	free_wiped(body);
	free_wiped(tok);
	return rc;
}

/* ---- credential_process ---- */

struct process {
	char *command;
	char *desc;
};

static void process_free(void *ctx)
{
	struct process *p = ctx;

	if (!p)
		return;
	free(p->command);
	free(p->desc);
	free(p);
}

/* Split a command line as a POSIX shell would its words (blanks, '...',
 * "...", backslash), with no expansion: what botocore does (shlex). */
static int split_words(const char *cmd, char ***argv_out, char **buf_out)
{
	size_t n = strlen(cmd), nw = 0;
	char *buf = malloc(n + 1), *w = buf;
	char **argv = calloc(n / 2 + 2, sizeof(char *));
	const char *p = cmd;

	if (!buf || !argv) {
		free(buf);
		free(argv);
		return -ENOMEM;
	}
	while (*p) {
		bool word = false;

		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		argv[nw++] = w;
		while (*p && *p != ' ' && *p != '\t') {
			word = true;
			if (*p == '\'') {
				const char *e = strchr(p + 1, '\'');

				if (!e)
					goto bad;
				memcpy(w, p + 1, (size_t)(e - p - 1));
				w += e - p - 1;
				p = e + 1;
			} else if (*p == '"') {
				for (p++; *p && *p != '"'; p++) {
					if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
						p++;
					*w++ = *p;
				}
				if (*p != '"')
					goto bad;
				p++;
			} else if (*p == '\\' && p[1]) {
				*w++ = p[1];
				p += 2;
			} else {
				*w++ = *p++;
			}
		}
		(void)word;
		*w++ = '\0';
	}
	if (nw == 0)
		goto bad;
	argv[nw] = NULL;
	*argv_out = argv;
	*buf_out = buf;
	return 0;
bad:
	free(buf);
	free(argv);
	return -EINVAL;
}

#define PROCESS_POLL_MS 20 /* how soon a fetch told to give up kills the process */

/* Read the process's output from fd into o until it ends or the deadline
 * passes, or the fetch is told to give up (the process then killed); wait
 * for it. False when it was killed so. */
static bool process_read(int fd, pid_t pid, int64_t deadline, struct bfs_s3_str *o, int *status)
{
	char buf[4096];
	bool timed_out = false;

	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - bfs_cred_now_ms();
		int rc;
		ssize_t n;

		if (left <= 0 || bfs_cred_fetch_cancelled()) {
			timed_out = true;
			kill(pid, SIGKILL);
			break;
		}
		rc = poll(&pf, 1, (int)(left < PROCESS_POLL_MS ? left : PROCESS_POLL_MS));
		if (rc < 0 && errno != EINTR)
			break;
		if (rc <= 0)
			continue;
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		bfs_s3_str_add(o, buf, (size_t)n);
	}
	explicit_bzero(buf, sizeof(buf));
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	return !timed_out;
}

/* The credentials in the output o of command argv0 (of provider p). */
static int process_creds(const struct process *p, const char *argv0, const struct bfs_s3_str *o,
			 struct bfs_cred **out, char *why, size_t cap)
{
	struct bfs_cjson *j = json_object_of(o->p, o->n);
	int64_t ver = 0;
	int rc;

	if (!j || bfs_cjson_int(j, "Version", &ver) || ver != 1) {
		snprintf(why, cap,
			 "credential_process %.200s: its output is not JSON with \"Version\": 1",
			 argv0);
		if (j) {
			bfs_cjson_wipe(j, "SecretAccessKey");
			bfs_cjson_wipe(j, "SessionToken");
		}
		bfs_cjson_free(j);
		return -EIO;
	}
	rc = json_creds(j, "SessionToken", true, p->desc, NULL, out, why, cap);
	if (rc) {
		char w[WHY];

		snprintf(w, sizeof(w), "credential_process %.200s: %s", argv0, why);
		snprintf(why, cap, "%s", w);
	}
	return rc;
}

static int process_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap)
{
	struct process *p = ctx;
	posix_spawn_file_actions_t fa;
	struct bfs_s3_str o = { .max = MAX_PROCESS_OUT };
	char **argv = NULL, *words = NULL;
	int fds[2] = { -1, -1 }, status = 0, rc;
	pid_t pid;
	int64_t deadline = bfs_cred_now_ms() + PROCESS_TIMEOUT_MS;
	bool timed_out;

	if (split_words(p->command, &argv, &words)) {
		snprintf(why, cap, "credential_process: cannot split the command line");
		return -EINVAL;
	}
	if (pipe2(fds, O_CLOEXEC)) {
		snprintf(why, cap, "credential_process: pipe: %s", strerror(errno));
		rc = -EIO;
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	fds[1] = -1;
	if (rc) {
		snprintf(why, cap, "credential_process: cannot run %.200s: %s", argv[0],
			 strerror(rc));
		rc = -EIO;
		goto out;
	}
	timed_out = !process_read(fds[0], pid, deadline, &o, &status);
	if (timed_out && bfs_cred_fetch_cancelled()) {
		snprintf(why, cap, "credential_process %.200s: given up (the keeper stops)",
			 argv[0]);
		rc = -ECANCELED;
		goto out;
	}
	if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (timed_out)
			snprintf(why, cap, "credential_process %.200s ran over %d s", argv[0],
				 PROCESS_TIMEOUT_MS / 1000);
		else
			snprintf(why, cap, "credential_process %.200s failed (%s %d)", argv[0],
				 WIFEXITED(status) ? "exit status" : "signal",
				 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		rc = -EIO;
		goto out;
	}
	if (o.err) {
		snprintf(why, cap, "credential_process %.200s: %s", argv[0],
			 o.err == -EFBIG ? "its output is over 64 KiB" : "out of memory");
		rc = o.err == -ENOMEM ? -ENOMEM : -EIO;
		goto out;
	}
	rc = process_creds(p, argv[0], &o, out, why, cap);
out:
	if (fds[0] >= 0)
		close(fds[0]);
	if (o.p)
		explicit_bzero(o.p, o.cap);
	bfs_s3_str_free(&o);
	free(argv);
	free(words);
	return rc;
}

/* ---- container credentials ---- */

struct container {
	char *url, *token, *token_file, *ca;
	char *desc;
};

static void container_free(void *ctx)
{
	struct container *c = ctx;

	if (!c)
		return;
	free(c->url);
	free_wiped(c->token);
	free(c->token_file);
	free(c->ca);
	free(c->desc);
	free(c);
}

static int container_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap)
{
	struct container *c = ctx;
	struct bfs_http_req req = { .method = "GET",
				    .url = c->url,
				    .max_body = 64 * 1024,
				    .tries = 3,
				    .connect_timeout_ms = 1000,
				    .timeout_ms = 2000,
				    .ca_file = c->ca };
	struct bfs_http_resp resp = { 0 };
	char *tok = NULL, *h = NULL, w[WHY];
	int rc;

	if (c->token_file) {
		rc = read_small(c->token_file, MAX_TOKEN_FILE, &tok, why, cap);
		if (rc)
			return rc == -ENOENT ? -EIO : rc;
	}
	if (tok || c->token) {
		h = hdr("Authorization", tok ? tok : c->token);
		if (!h) {
			free_wiped(tok);
			return -ENOMEM;
		}
		req.headers = (const char *const *)&h;
		req.nheaders = 1;
	}
	rc = bfs_http_request(&req, &resp, w, sizeof(w));
	if (rc) {
		snprintf(why, cap, "the container credentials endpoint: %s", w);
		rc = http_errno(rc);
	} else if (resp.status != 200) {
		snprintf(why, cap, "the container credentials endpoint answered HTTP %ld%s",
			 resp.status,
			 resp.status == 401 || resp.status == 403
				 ? " (a wrong authorization token?)"
				 : "");
		rc = resp.status == 401 || resp.status == 403 ? -EACCES : -EIO;
	} else {
		struct bfs_cjson *j = json_object_of(resp.body, resp.len);
		const char *arn = j ? bfs_cjson_str(j, "RoleArn", NULL) : NULL;
		char *acct = arn ? strdup(role_name(arn)) : NULL;

		rc = json_creds(j, "Token", false, c->desc, acct, out, w, sizeof(w));
		free(acct);
		if (rc)
			snprintf(why, cap, "the container credentials endpoint: %s", w);
	}
	if (rc) {
		const char *secrets[] = { tok, c->token };

		bfs_cred_scrub(why, cap, secrets, 2);
	}
	bfs_http_resp_free(&resp);
	free_wiped(h);
	free_wiped(tok);
	return rc;
}

/* Whether an http:// full URI may be used: a loopback host, or the ECS and
 * EKS Pod Identity addresses (what the SDKs allow). */
static bool container_host_ok(const char *url)
{
	static const char *const ok[] = { "127.",	   "localhost",	     "[::1]",
					  "169.254.170.2", "169.254.170.23", "[fd00:ec2::23]" };
	char host[300];
	const char *path;

	if (strncasecmp(url, "https://", 8) == 0)
		return true;
	if (url_split(url, host, sizeof(host), &path))
		return false;
	if (host[0] != '[') {
		char *colon = strchr(host, ':');

		if (colon)
			*colon = '\0';
	} else {
		char *rb = strchr(host, ']');

		if (rb)
			rb[1] = '\0';
	}
	for (size_t i = 0; i < BFS_ARRAY_SIZE(ok); i++)
		if (ok[i][strlen(ok[i]) - 1] == '.' ? strncmp(host, ok[i], strlen(ok[i])) == 0
						    : strcmp(host, ok[i]) == 0)
			return true;
	return false;
}

/* ---- the instance metadata service ---- */

struct imds {
	char *endpoint;
	unsigned timeout_ms, tries;
	bool v1_disabled;
	char *desc; /* set at the first fetch: "instance role `R` via IMDSv2" */
};

static void imds_free(void *ctx)
{
	struct imds *m = ctx;

	if (!m)
		return;
	free(m->endpoint);
	free(m->desc);
	free(m);
}

static int imds_get(const struct imds *m, const char *path, const char *token,
		    struct bfs_http_resp *resp, char *why, size_t cap)
{
	char url[600], w[WHY], *h = NULL;
	struct bfs_http_req req = { .method = "GET",
				    .url = url,
				    .max_body = 64 * 1024,
				    .tries = m->tries,
				    .connect_timeout_ms = m->timeout_ms,
				    .timeout_ms = m->timeout_ms };
	int rc;

	snprintf(url, sizeof(url), "%s%s", m->endpoint, path);
	if (token) {
		if (!(h = hdr("X-aws-ec2-metadata-token", token)))
			return -ENOMEM;
		req.headers = (const char *const *)&h;
		req.nheaders = 1;
	}
	rc = bfs_http_request(&req, resp, w, sizeof(w));
	free_wiped(h);
	if (rc) {
		snprintf(why, cap, "the instance metadata service: %s", w);
		return http_errno(rc);
	}
	return 0;
}

static int imds_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap)
{
	struct imds *m = ctx;
	char url[600], w[WHY], role[256], path[400], desc[400];
	const char *const th[] = { "X-aws-ec2-metadata-token-ttl-seconds: " IMDS_TTL };
	struct bfs_http_req req = { .method = "PUT",
				    .url = url,
				    .headers = th,
				    .nheaders = 1,
				    .max_body = 4096,
				    .tries = m->tries,
				    .connect_timeout_ms = m->timeout_ms,
				    .timeout_ms = m->timeout_ms };
	struct bfs_http_resp tr = { 0 }, resp = { 0 };
	char *token = NULL;
	int rc;

	snprintf(url, sizeof(url), "%s/latest/api/token", m->endpoint);
	rc = bfs_http_request(&req, &tr, w, sizeof(w));
	if (rc) {
		snprintf(why, cap, "the instance metadata service: %s", w);
		return http_errno(rc);
	}
	if (tr.status == 200 && tr.len > 0) {
		token = tr.body;
		tr.body = NULL;
		token[strcspn(token, "\r\n")] = '\0';
	} else if (tr.status == 403 || tr.status == 404 || tr.status == 405) {
		if (m->v1_disabled) {
			snprintf(why, cap,
				 "the instance metadata service refused a session token (HTTP "
				 "%ld) and IMDSv1 is disabled (AWS_EC2_METADATA_V1_DISABLED)",
				 tr.status);
			bfs_http_resp_free(&tr);
			return -EACCES;
		}
	} else {
		snprintf(why, cap,
			 "the instance metadata service answered the token request "
			 "with HTTP %ld",
			 tr.status);
		bfs_http_resp_free(&tr);
		return -EIO;
	}
	bfs_http_resp_free(&tr);
	rc = imds_get(m, "/latest/meta-data/iam/security-credentials/", token, &resp, why, cap);
	if (rc)
		goto out;
	if (resp.status == 404) {
		snprintf(why, cap, "the instance has no IAM role (instance profile)");
		rc = -ENOENT;
		goto out;
	}
	if (resp.status != 200 || resp.len == 0 || resp.len >= sizeof(role)) {
		snprintf(why, cap,
			 "the instance metadata service answered the role request with "
			 "HTTP %ld",
			 resp.status);
		rc = -EIO;
		goto out;
	}
	snprintf(role, sizeof(role), "%.*s", (int)strcspn(resp.body, "\r\n"), resp.body);
	bfs_http_resp_free(&resp);
	for (char *c = role; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr("+=,.@_-", *c)) {
			snprintf(why, cap, "the instance metadata service named a bad role");
			rc = -EIO;
			goto out;
		}
	snprintf(path, sizeof(path), "/latest/meta-data/iam/security-credentials/%s", role);
	rc = imds_get(m, path, token, &resp, why, cap);
	if (rc)
		goto out;
	if (resp.status != 200) {
		snprintf(why, cap, "the instance metadata service answered HTTP %ld for role %s",
			 resp.status, role);
		rc = -EIO;
		goto out;
	}
	snprintf(desc, sizeof(desc), "instance role `%s` via %s", role,
		 token ? "IMDSv2" : "IMDSv1");
	rc = json_creds(json_object_of(resp.body, resp.len), "Token", false, desc, role, out, w,
			sizeof(w));
	if (rc)
		snprintf(why, cap, "the instance metadata service: %s", w);
out:
	if (rc) {
		const char *secrets[] = { token };

		bfs_cred_scrub(why, cap, secrets, 1);
	}
	bfs_http_resp_free(&resp);
	free_wiped(token);
	return rc;
}

/* ---- the profile ---- */

struct profile {
	const char *name;
	bool named; /* given, not the default */
	char cred_path[PATH_MAX], conf_path[PATH_MAX];
	struct bfs_s3_ini cred, conf;
};

static void profile_free(struct profile *p)
{
	bfs_s3_ini_free(&p->cred);
	bfs_s3_ini_free(&p->conf);
}

static int profile_load(struct profile *p, const char *name)
{
	char section[300];
	int rc;

	memset(&p->cred, 0, sizeof(p->cred));
	memset(&p->conf, 0, sizeof(p->conf));
	p->name = name;
	if (strlen(name) > 200)
		return bfs_err_set(-EINVAL, "a profile name longer than 200 characters");
	if ((rc = bfs_s3_profile_path(p->cred_path, sizeof(p->cred_path),
				      "AWS_SHARED_CREDENTIALS_FILE", "credentials")) ||
	    (rc = bfs_s3_profile_path(p->conf_path, sizeof(p->conf_path), "AWS_CONFIG_FILE",
				      "config")))
		return rc;
	if ((rc = bfs_s3_ini_load(&p->cred, p->cred_path, name)))
		return rc;
	if (strcmp(name, "default") == 0)
		snprintf(section, sizeof(section), "default");
	else
		snprintf(section, sizeof(section), "profile %s", name);
	if ((rc = bfs_s3_ini_load(&p->conf, p->conf_path, section)))
		return rc;
	if (!p->conf.found && strcmp(name, "default") == 0) {
		bfs_s3_ini_free(&p->conf); /* "[profile default]" is read too */
		if ((rc = bfs_s3_ini_load(&p->conf, p->conf_path, "profile default")))
			return rc;
	}
	return 0;
}

/* A key of the profile: the config file's, or the credentials file's. */
static const char *pget(const struct profile *p, const char *key)
{
	const char *v = bfs_s3_ini_get(&p->cred, key);

	return v ? v : bfs_s3_ini_get(&p->conf, key);
}

/* Static keys in one of the profile's files (i: 0 credentials, 1 config).
 * -ENOENT when it has none. */
static int profile_keys(const struct profile *p, int i, struct bfs_cred **out)
{
	const struct bfs_s3_ini *s = i == 0 ? &p->cred : &p->conf;
	const char *path = i == 0 ? p->cred_path : p->conf_path;
	const char *kid = bfs_s3_ini_get(s, "aws_access_key_id");
	const char *sec = bfs_s3_ini_get(s, "aws_secret_access_key");
	const char *tok = bfs_s3_ini_get(s, "aws_session_token");
	char src[PATH_MAX + 64];
	int rc;

	if (!tok)
		tok = bfs_s3_ini_get(s, "aws_security_token");
	if (!kid && !sec)
		return -ENOENT;
	if (!kid || !sec || !*kid || !*sec)
		return bfs_err_set(-EINVAL, "profile '%s' in %s has %s but not %s", p->name, path,
				   kid ? "aws_access_key_id" : "aws_secret_access_key",
				   kid ? "aws_secret_access_key" : "aws_access_key_id");
	snprintf(src, sizeof(src), "profile '%s' in %s", p->name, path);
	rc = bfs_cred_new(out, BFS_CRED_SIGV4, kid, sec, tok, 0, src, NULL);
	if (rc == -EINVAL)
		return bfs_err_set(rc, "profile '%s' in %s: a key with a control character",
				   p->name, path);
	return rc ? bfs_err_set(rc, "out of memory") : 0;
}

/* ---- building providers ---- */

struct chain {
	const char *region, *ca;
	struct bfs_s3_str looked;
};

static void looked(struct chain *ch, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void looked(struct chain *ch, const char *fmt, ...)
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

static int provider_container(struct chain *ch, struct bfs_cred_provider *out, bool *found);
static int provider_imds(struct chain *ch, struct bfs_cred_provider *out, bool *found);
static int provider_of_profile(struct chain *ch, const char *name, int depth,
			       struct bfs_cred_provider *out, char *desc, size_t desccap);

static int env_keys(struct bfs_cred **out)
{
	const char *id = env("AWS_ACCESS_KEY_ID"), *secret = env("AWS_SECRET_ACCESS_KEY");
	int rc;

	if (!id && !secret)
		return -ENOENT;
	if (!id || !secret)
		return bfs_err_set(-EINVAL, "%s is set but %s is not: set both, or neither",
				   id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
				   id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
	rc = bfs_cred_new(out, BFS_CRED_SIGV4, id, secret, env("AWS_SESSION_TOKEN"), 0,
			  "the environment (AWS_ACCESS_KEY_ID)", NULL);
	if (rc == -EINVAL)
		return bfs_err_set(rc, "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or "
				       "AWS_SESSION_TOKEN holds a control character");
	return rc ? bfs_err_set(rc, "out of memory") : 0;
}

/* An AssumeRole provider for profile p's role_arn. */
/* The credentials a role of profile p is assumed with, from its
 * source_profile src: p's own keys, or the provider of profile src. */
static int assume_source_profile(struct chain *ch, const struct profile *p, const char *src,
				 int depth, struct bfs_cred_provider *out)
{
	char desc[400] = "";
	struct bfs_cred *c = NULL;
	int rc;

	if (strcmp(src, p->name) != 0)
		return provider_of_profile(ch, src, depth + 1, out, desc, sizeof(desc));
	/* its own keys */
	rc = profile_keys(p, 0, &c);
	if (rc == -ENOENT)
		rc = profile_keys(p, 1, &c);
	if (rc == -ENOENT)
		rc = bfs_err_set(-EINVAL, "profile '%s' is its own source_profile but has no keys",
				 p->name);
	if (rc)
		return rc;
	static_provider(out, c);
	return 0;
}

/* The credentials a role of profile p is assumed with, from its
 * credential_source csrc: the environment, IMDS or the container's. */
static int assume_credential_source(struct chain *ch, const struct profile *p, const char *csrc,
				    struct bfs_cred_provider *out)
{
	bool found = false;
	int rc;

	if (strcasecmp(csrc, "Environment") == 0) {
		struct bfs_cred *c = NULL;

		rc = env_keys(&c);
		if (rc == -ENOENT)
			rc = bfs_err_set(-EACCES,
					 "profile '%s': credential_source Environment, but "
					 "AWS_ACCESS_KEY_ID is not set",
					 p->name);
		if (rc)
			return rc;
		static_provider(out, c);
		return 0;
	}
	if (strcasecmp(csrc, "Ec2InstanceMetadata") == 0)
		rc = provider_imds(ch, out, &found);
	else if (strcasecmp(csrc, "EcsContainer") == 0)
		rc = provider_container(ch, out, &found);
	else
		rc = bfs_err_set(-EINVAL,
				 "profile '%s': credential_source '%.60s' is none of "
				 "Environment, Ec2InstanceMetadata, EcsContainer",
				 p->name, csrc);
	if (rc == 0 && !found)
		rc = bfs_err_set(-EACCES, "profile '%s': credential_source %s has no credentials",
				 p->name, csrc);
	return rc;
}

static int provider_assume(struct chain *ch, const struct profile *p, int depth,
			   struct bfs_cred_provider *out)
{
	const char *src = pget(p, "source_profile"), *csrc = pget(p, "credential_source");
	struct assume *a = calloc(1, sizeof(*a));
	char buf[600];
	int rc;

	if (!a)
		return bfs_err_set(-ENOMEM, "out of memory");
	if (pget(p, "mfa_serial")) {
		rc = bfs_err_set(-EACCES,
				 "profile '%s' assumes its role with an MFA code (mfa_serial), "
				 "which a mount cannot ask for: export credentials instead (aws "
				 "configure export-credentials --format env)",
				 p->name);
		goto fail;
	}
	if (src && csrc) {
		rc = bfs_err_set(-EINVAL,
				 "profile '%s' has both source_profile and credential_source: "
				 "give one",
				 p->name);
		goto fail;
	}
	if (src) {
		rc = assume_source_profile(ch, p, src, depth, &a->src);
		if (rc)
			goto fail;
		snprintf(buf, sizeof(buf), "source_profile '%s'", src);
	} else if (csrc) {
		rc = assume_credential_source(ch, p, csrc, &a->src);
		if (rc)
			goto fail;
		snprintf(buf, sizeof(buf), "credential_source %s", csrc);
	} else {
		rc = bfs_err_set(-EINVAL,
				 "profile '%s' has role_arn but neither source_profile nor "
				 "credential_source (nor web_identity_token_file)",
				 p->name);
		goto fail;
	}
	a->source_desc = strdup(buf);
	a->role_arn = strdup(pget(p, "role_arn"));
	a->session = session_name(pget(p, "role_session_name"));
	a->external_id = xstrdup(pget(p, "external_id"));
	a->duration = xstrdup(pget(p, "duration_seconds"));
	snprintf(buf, sizeof(buf), "role `%s` via STS AssumeRole (profile '%s', %s)",
		 role_name(pget(p, "role_arn")), p->name, a->source_desc ? a->source_desc : "");
	a->desc = strdup(buf);
	if (!a->source_desc || !a->role_arn || !a->session || !a->desc ||
	    (pget(p, "external_id") && !a->external_id) ||
	    (pget(p, "duration_seconds") && !a->duration) ||
	    sts_init(&a->sts, ch->region, ch->ca)) {
		rc = bfs_err_set(-ENOMEM, "out of memory");
		goto fail;
	}
	*out = (struct bfs_cred_provider){
		.name = a->desc, .fetch = assume_fetch, .ctx = a, .ctx_free = assume_free
	};
	return 0;
fail:
	assume_free(a);
	return rc;
}

/* The credentials a source_profile gives: its role (chained), its keys, its
 * credential_process. */
static int provider_of_profile(struct chain *ch, const char *name, int depth,
			       struct bfs_cred_provider *out, char *desc, size_t desccap)
{
	struct profile p;
	struct bfs_cred *c = NULL;
	int rc;

	if (depth > MAX_DEPTH)
		return bfs_err_set(-EINVAL, "profile '%s': source_profile chains deeper than %d",
				   name, MAX_DEPTH);
	rc = profile_load(&p, name);
	if (rc)
		goto out;
	if (!p.cred.found && !p.conf.found) {
		rc = bfs_err_set(-EINVAL, "source_profile '%s' is in neither %s nor %s", name,
				 p.cred_path, p.conf_path);
		goto out;
	}
	if (pget(&p, "role_arn")) {
		rc = provider_assume(ch, &p, depth, out);
		goto out;
	}
	rc = profile_keys(&p, 0, &c);
	if (rc == -ENOENT)
		rc = profile_keys(&p, 1, &c);
	if (rc == 0) {
		static_provider(out, c);
		goto out;
	}
	if (rc != -ENOENT)
		goto out;
	if (pget(&p, "credential_process")) {
		struct process *pr = calloc(1, sizeof(*pr));
		char buf[300];

		snprintf(buf, sizeof(buf), "credential_process of profile '%s'", name);
		if (!pr || !(pr->command = strdup(pget(&p, "credential_process"))) ||
		    !(pr->desc = strdup(buf))) {
			process_free(pr);
			rc = bfs_err_set(-ENOMEM, "out of memory");
			goto out;
		}
		*out = (struct bfs_cred_provider){ .name = pr->desc,
						   .fetch = process_fetch,
						   .ctx = pr,
						   .ctx_free = process_free };
		rc = 0;
		goto out;
	}
	rc = bfs_err_set(-EINVAL, "source_profile '%s' has no credentials", name);
out:
	if (rc == 0 && desc)
		snprintf(desc, desccap, "%s", out->name);
	profile_free(&p);
	return rc;
}

static int webid_make(struct chain *ch, const char *file, const char *arn, const char *session,
		      const char *where, struct bfs_cred_provider *out)
{
	struct webid *w = calloc(1, sizeof(*w));
	char buf[600];

	if (!w)
		return bfs_err_set(-ENOMEM, "out of memory");
	snprintf(buf, sizeof(buf), "role `%s` via STS AssumeRoleWithWebIdentity (%s)",
		 role_name(arn), where);
	w->token_file = strdup(file);
	w->role_arn = strdup(arn);
	w->session = session_name(session);
	w->desc = strdup(buf);
	if (!w->token_file || !w->role_arn || !w->session || !w->desc ||
	    sts_init(&w->sts, ch->region, ch->ca)) {
		webid_free(w);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	*out = (struct bfs_cred_provider){
		.name = w->desc, .fetch = webid_fetch, .ctx = w, .ctx_free = webid_free
	};
	return 0;
}

static int provider_container(struct chain *ch, struct bfs_cred_provider *out, bool *found)
{
	const char *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	const char *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	struct container *c;
	char host[300], buf[400];
	const char *path;

	*found = false;
	if (!rel && !full) {
		looked(ch, "container credentials (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and "
			   "_FULL_URI unset)");
		return 0;
	}
	if (!rel && !container_host_ok(full))
		return bfs_err_set(-EINVAL,
				   "AWS_CONTAINER_CREDENTIALS_FULL_URI: an http:// URI must name a "
				   "loopback address, 169.254.170.2 or 169.254.170.23 (or use "
				   "https://)");
	c = calloc(1, sizeof(*c));
	if (!c)
		return bfs_err_set(-ENOMEM, "out of memory");
	if (rel) {
		size_t n = strlen(CONTAINER_HOST) + strlen(rel) + 2;

		c->url = malloc(n);
		if (c->url)
			snprintf(c->url, n, "%s%s%s", CONTAINER_HOST, rel[0] == '/' ? "" : "/",
				 rel);
	} else {
		c->url = strdup(full);
	}
	c->token_file = xstrdup(env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"));
	c->token = c->token_file ? NULL : xstrdup(env("AWS_CONTAINER_AUTHORIZATION_TOKEN"));
	c->ca = xstrdup(ch->ca);
	if (c->url && url_split(c->url, host, sizeof(host), &path) == 0)
		snprintf(buf, sizeof(buf), "container credentials (%s://%s)",
			 strncasecmp(c->url, "https", 5) == 0 ? "https" : "http", host);
	else
		snprintf(buf, sizeof(buf), "container credentials");
	c->desc = strdup(buf);
	if (!c->url || !c->desc || (ch->ca && !c->ca) ||
	    (env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") && !c->token_file) ||
	    (!c->token_file && env("AWS_CONTAINER_AUTHORIZATION_TOKEN") && !c->token)) {
		container_free(c);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	*out = (struct bfs_cred_provider){
		.name = c->desc, .fetch = container_fetch, .ctx = c, .ctx_free = container_free
	};
	*found = true;
	return 0;
}

static unsigned env_uint(const char *name, unsigned def, unsigned max)
{
	const char *v = env(name);
	char *end;
	unsigned long n;

	if (!v)
		return def;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n == 0 || n > max)
		return def;
	return (unsigned)n;
}

/* IMDS: found when enabled (whether it answers is learned by fetching). */
static int provider_imds(struct chain *ch, struct bfs_cred_provider *out, bool *found)
{
	const char *ep = env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	const char *mode = env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
	struct imds *m;
	size_t n;

	*found = false;
	if (truthy(env("AWS_EC2_METADATA_DISABLED"))) {
		looked(ch, "the instance metadata service (AWS_EC2_METADATA_DISABLED)");
		return 0;
	}
	if (!ep)
		ep = mode && strcasecmp(mode, "IPv6") == 0 ? IMDS_DEFAULT6 : IMDS_DEFAULT;
	if (strncasecmp(ep, "http://", 7) != 0 && strncasecmp(ep, "https://", 8) != 0)
		return bfs_err_set(-EINVAL,
				   "AWS_EC2_METADATA_SERVICE_ENDPOINT '%.200s': not an http:// URL",
				   ep);
	m = calloc(1, sizeof(*m));
	if (!m || !(m->endpoint = strdup(ep)) ||
	    !(m->desc = strdup("the instance role via IMDS"))) {
		imds_free(m);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	n = strlen(m->endpoint);
	while (n && m->endpoint[n - 1] == '/')
		m->endpoint[--n] = '\0';
	/* botocore's defaults: 1 s, 1 attempt */
	m->timeout_ms = 1000 * env_uint("AWS_METADATA_SERVICE_TIMEOUT", 1, 60);
	m->tries = env_uint("AWS_METADATA_SERVICE_NUM_ATTEMPTS", 1, 10);
	m->v1_disabled = truthy(env("AWS_EC2_METADATA_V1_DISABLED"));
	*out = (struct bfs_cred_provider){
		.name = m->desc, .fetch = imds_fetch, .ctx = m, .ctx_free = imds_free
	};
	*found = true;
	return 0;
}

/* A keeper over provider p; its first fetch decides. -ENOENT (with why)
 * when the place turns out empty. */
static int keep(struct bfs_cred_keeper **out, struct bfs_cred_provider *p, char *why, size_t cap)
{
	struct bfs_cred *c = NULL;
	int rc = p->fetch(p->ctx, &c, why, cap);

	if (rc) {
		if (p->ctx_free)
			p->ctx_free(p->ctx);
		return rc;
	}
	/* the provider's name: the credential's source, once known */
	{
		struct bfs_cred_provider q = *p;
		char name[400];

		snprintf(name, sizeof(name), "%s", c->source);
		q.name = name;
		rc = bfs_cred_keeper_new(out, &q, c);
	}
	bfs_cred_unref(c);
	return rc;
}

/* How a place of the chain ended. */
enum chain_end {
	CHAIN_ON, /* nothing there: look on */
	CHAIN_STATIC, /* keys, in *c */
	CHAIN_FETCHED, /* a provider's first fetch: rc (and why) from it */
	CHAIN_FAIL, /* an error: rc */
};

/* A keeper over provider p just made with rc: the end of the chain. */
static enum chain_end chain_keep(int made, struct bfs_cred_provider *p,
				 struct bfs_cred_keeper **out, char *why, size_t cap, int *rc)
{
	*rc = made == 0 ? keep(out, p, why, cap) : made;
	return CHAIN_FETCHED;
}

/* 2. the profile's role; 3. web identity, from the environment or the
 * profile. */
static enum chain_end chain_roles(struct chain *ch, struct profile *p, struct bfs_cred_keeper **out,
				  char *why, size_t cap, int *rc)
{
	struct bfs_cred_provider pr;
	const char *v;

	if (pget(p, "role_arn") && !pget(p, "web_identity_token_file"))
		return chain_keep(provider_assume(ch, p, 0, &pr), &pr, out, why, cap, rc);
	v = env("AWS_WEB_IDENTITY_TOKEN_FILE");
	if (v && env("AWS_ROLE_ARN"))
		return chain_keep(webid_make(ch, v, env("AWS_ROLE_ARN"),
					     env("AWS_ROLE_SESSION_NAME"),
					     "AWS_WEB_IDENTITY_TOKEN_FILE", &pr),
				  &pr, out, why, cap, rc);
	if (pget(p, "web_identity_token_file") && pget(p, "role_arn")) {
		char where[300];

		snprintf(where, sizeof(where), "profile '%s'", p->name);
		return chain_keep(webid_make(ch, pget(p, "web_identity_token_file"),
					     pget(p, "role_arn"), pget(p, "role_session_name"),
					     where, &pr),
				  &pr, out, why, cap, rc);
	}
	looked(ch, "web identity (AWS_WEB_IDENTITY_TOKEN_FILE%s unset)",
	       v ? " set, AWS_ROLE_ARN" : "");
	return CHAIN_ON;
}

/* 4. SSO: out of scope, an error that says what to do instead. */
static int chain_sso(const struct profile *p)
{
	if (!pget(p, "sso_session") && !pget(p, "sso_start_url"))
		return 0;
	return bfs_err_set(-EACCES,
			   "profile '%s' gets its credentials through AWS IAM Identity Center "
			   "(%s), whose token cache (aws sso login) batchfs does not read: "
			   "export AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and "
			   "AWS_SESSION_TOKEN (aws configure export-credentials --format env "
			   "prints them), or use no_sign_request for a public bucket",
			   p->name, pget(p, "sso_session") ? "sso_session" : "sso_start_url");
}

/* 5. the credentials file's keys; 6. credential_process; 7. the config
 * file's keys. */
static enum chain_end chain_profile_keys(struct chain *ch, struct profile *p, struct bfs_cred **c,
					 struct bfs_cred_keeper **out, char *why, size_t cap,
					 int *rc)
{
	struct bfs_cred_provider pr;

	*rc = profile_keys(p, 0, c);
	if (*rc == 0)
		return CHAIN_STATIC;
	if (*rc != -ENOENT)
		return CHAIN_FAIL;
	if (pget(p, "credential_process"))
		return chain_keep(provider_of_profile(ch, p->name, 0, &pr, NULL, 0), &pr, out, why,
				  cap, rc);
	*rc = profile_keys(p, 1, c);
	if (*rc == 0)
		return CHAIN_STATIC;
	if (*rc != -ENOENT)
		return CHAIN_FAIL;
	looked(ch, "profile '%s' in %s and %s (no keys, role or credential_process)", p->name,
	       p->cred_path, p->conf_path);
	return CHAIN_ON;
}

/* The profile (named, or AWS_PROFILE's, or "default") loaded into *p, and
 * the places 2 to 7 of the chain, which it names. */
static enum chain_end chain_profile(struct chain *ch, struct profile *p, const char *profile,
				    struct bfs_cred **c, struct bfs_cred_keeper **out, char *why,
				    size_t cap, int *rc)
{
	enum chain_end end;

	if (!profile)
		profile = env("AWS_PROFILE");
	*rc = profile_load(p, profile ? profile : "default");
	if (*rc)
		return CHAIN_FAIL;
	p->named = profile != NULL;
	if (p->named && !p->cred.found && !p->conf.found) {
		*rc = bfs_err_set(-EINVAL, "profile '%s' is in neither %s nor %s", p->name,
				  p->cred_path, p->conf_path);
		return CHAIN_FAIL;
	}
	end = chain_roles(ch, p, out, why, cap, rc);
	if (end != CHAIN_ON)
		return end;
	*rc = chain_sso(p);
	if (*rc)
		return CHAIN_FAIL;
	return chain_profile_keys(ch, p, c, out, why, cap, rc);
}

/* 8. container credentials; 9. IMDS, where no credentials are (as
 * botocore) the end of the chain, not an error. */
static enum chain_end chain_machine(struct chain *ch, struct bfs_cred_keeper **out, char *why,
				    size_t cap, int *rc)
{
	struct bfs_cred_provider pr;
	bool found;

	*rc = provider_container(ch, &pr, &found);
	if (*rc)
		return CHAIN_FAIL;
	if (found)
		return chain_keep(0, &pr, out, why, cap, rc);
	*rc = provider_imds(ch, &pr, &found);
	if (*rc)
		return CHAIN_FAIL;
	if (!found)
		return CHAIN_ON;
	*rc = keep(out, &pr, why, cap);
	if (*rc && *rc != -ENOMEM) { /* as botocore: no credentials there */
		looked(ch, "%s", why);
		return CHAIN_ON;
	}
	return CHAIN_FETCHED;
}

int bfs_credaws_chain(struct bfs_cred_keeper **out, const char *profile, const char *region,
		      const char *ca_file, char *looked_out, size_t cap)
{
	struct chain ch = { .region = region, .ca = ca_file };
	struct profile p;
	struct bfs_cred_provider pr;
	struct bfs_cred *c = NULL;
	char why[WHY] = "";
	enum chain_end end = CHAIN_STATIC;
	int rc;

	memset(&p.cred, 0, sizeof(p.cred));
	memset(&p.conf, 0, sizeof(p.conf));
	*out = NULL;
	/* 1. the environment */
	rc = env_keys(&c);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc) {
		looked(&ch, "the environment (AWS_ACCESS_KEY_ID unset)");
		end = chain_profile(&ch, &p, profile, &c, out, why, sizeof(why), &rc);
		if (end == CHAIN_ON)
			end = chain_machine(&ch, out, why, sizeof(why), &rc);
	}
	switch (end) {
	case CHAIN_ON:
		rc = -ENOENT;
		snprintf(looked_out, cap, "%s", ch.looked.p ? ch.looked.p : "nowhere");
		break;
	case CHAIN_STATIC:
		static_provider(&pr, c);
		rc = bfs_cred_keeper_new(out, &pr, c);
		break;
	case CHAIN_FETCHED:
		if (rc && why[0]) {
			if (rc ==
			    -ENOENT) /* a place named by a variable: its absence is an error */
				rc = -EIO;
			bfs_err_format("%s", why);
		}
		break;
	case CHAIN_FAIL:
		break;
	}
	if (rc && rc != -ENOENT && *out) {
		bfs_cred_keeper_unref(*out);
		*out = NULL;
	}
	profile_free(&p);
	bfs_s3_str_free(&ch.looked);
	return rc;
}

int bfs_credaws_static(struct bfs_cred_keeper **out, const char *profile, char *looked_out,
		       size_t cap)
{
	struct profile p;
	struct bfs_cred_provider pr;
	struct bfs_cred *c = NULL;
	int rc;

	memset(&p.cred, 0, sizeof(p.cred));
	memset(&p.conf, 0, sizeof(p.conf));
	*out = NULL;
	rc = env_keys(&c);
	if (rc == -ENOENT) {
		if (!profile)
			profile = env("AWS_PROFILE");
		rc = profile_load(&p, profile ? profile : "default");
		if (rc == 0 && profile && !p.cred.found && !p.conf.found)
			rc = bfs_err_set(-EINVAL, "profile '%s' is in neither %s nor %s", p.name,
					 p.cred_path, p.conf_path);
		if (rc == 0)
			rc = profile_keys(&p, 0, &c);
		if (rc == -ENOENT)
			rc = profile_keys(&p, 1, &c);
		if (rc == -ENOENT)
			snprintf(
				looked_out, cap,
				"the environment (AWS_ACCESS_KEY_ID unset), profile '%s' in %s and "
				"%s (no HMAC keys)",
				p.name, p.cred_path, p.conf_path);
	}
	if (rc == 0) {
		static_provider(&pr, c);
		rc = bfs_cred_keeper_new(out, &pr, c);
	}
	profile_free(&p);
	return rc;
}
