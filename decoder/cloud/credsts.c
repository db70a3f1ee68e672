/* SPDX-License-Identifier: Apache-2.0 */
/* credsts.c — AWS STS for the AWS credential providers: its endpoint (see
 * credaws.c), a signed or unsigned POST of a form, its XML answer (s3xml.c)
 * as a credential. */
#include "credaws_impl.h"

#include "common.h"
#include "http.h"
#include "s3sign.h"
#include "s3xml.h"
#include "sha256.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char sts_ctype[] = "application/x-www-form-urlencoded; charset=utf-8";

/* ---- STS ---- */

void bfs_credaws_sts_destroy(struct sts *s)
{
	free(s->url);
	s->url = NULL;
	free(s->region);
	s->region = NULL;
	free(s->ca);
	s->ca = NULL;
}

int bfs_credaws_sts_init(struct sts *s, const char *region, const char *ca)
{
	const char *ep = bfs_env("AWS_ENDPOINT_URL_STS");
	char buf[160];
	size_t n;

	memset(s, 0, sizeof(*s));
	if (!ep)
		ep = bfs_env("AWS_ENDPOINT_URL");
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
	s->ca = bfs_credaws_strdup(ca);
	if (!s->url || !s->region || (ca && !s->ca)) {
		bfs_credaws_sts_destroy(s);
		return -ENOMEM;
	}
	n = strlen(s->url);
	while (n && s->url[n - 1] == '/')
		s->url[--n] = '\0';
	return 0;
}

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

	if (bfs_credaws_url_split(s->url, host, sizeof(host), &path)) {
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
	h[(*nh)++] = bfs_credaws_hdr("X-Amz-Date", sig.amz_date);
	h[(*nh)++] = bfs_credaws_hdr("X-Amz-Content-Sha256", sig.content_sha256);
	if (signer->token)
		h[(*nh)++] = bfs_credaws_hdr("X-Amz-Security-Token", signer->token);
	h[(*nh)++] = bfs_credaws_hdr("Authorization", sig.authorization);
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
int bfs_credaws_sts_call(const struct sts *s, const char *action, const char *form,
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

	h[nh++] = bfs_credaws_hdr("Content-Type", sts_ctype);
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
		bfs_credaws_free_wiped(h[i]);
	if (rc) { /* an echo of what was sent is no line of ours */
		const char *secrets[] = { signer ? signer->secret : NULL,
					  signer ? signer->token : NULL };

		bfs_cred_scrub(why, cap, secrets, 2);
	}
	return rc;
}
