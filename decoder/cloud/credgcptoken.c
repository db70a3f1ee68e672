/* SPDX-License-Identifier: Apache-2.0 */
/* credgcptoken.c — the Google provider: an access token fetched from the
 * place the chain found (a token endpoint, given a key file's grant, or the
 * metadata server), as google-auth does. See credgcp_impl.h. */
#include "credgcp_impl.h"

#include "common.h"
#include "cred.h"
#include "credgcp.h"
#include "http.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bfs_credgcp_ctx_free(void *p)
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
		bfs_credgcp_free_secret(&tok);
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
int bfs_credgcp_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap)
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
	bfs_credgcp_free_secret(&body);
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
	bfs_credgcp_free_secret(&tok);
	free(url);
	bfs_http_resp_free(&resp);
	return rc;
}

/* The VM's service account's email, for humans; "" when not known. */
void bfs_credgcp_metadata_email(struct gcp_ctx *c)
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
