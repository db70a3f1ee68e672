/* SPDX-License-Identifier: Apache-2.0 */
/* credcontainer.c — the container credentials provider (ECS, EKS Pod
 * Identity): AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI, with
 * AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or _TOKEN. */
#include "credaws_impl.h"

#include "cjson.h"
#include "common.h"
#include "http.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>

#define CONTAINER_HOST "http://169.254.170.2"

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
	bfs_credaws_free_wiped(c->token);
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
		rc = bfs_credaws_read_small(c->token_file, MAX_TOKEN_FILE, &tok, why, cap);
		if (rc)
			return rc == -ENOENT ? -EIO : rc;
	}
	if (tok || c->token) {
		h = bfs_credaws_hdr("Authorization", tok ? tok : c->token);
		if (!h) {
			bfs_credaws_free_wiped(tok);
			return -ENOMEM;
		}
		req.headers = (const char *const *)&h;
		req.nheaders = 1;
	}
	rc = bfs_http_request(&req, &resp, w, sizeof(w));
	if (rc) {
		snprintf(why, cap, "the container credentials endpoint: %s", w);
		rc = bfs_credaws_http_errno(rc);
	} else if (resp.status != 200) {
		snprintf(why, cap, "the container credentials endpoint answered HTTP %ld%s",
			 resp.status,
			 resp.status == 401 || resp.status == 403
				 ? " (a wrong authorization token?)"
				 : "");
		rc = resp.status == 401 || resp.status == 403 ? -EACCES : -EIO;
	} else {
		struct bfs_cjson *j = bfs_credaws_json_object(resp.body, resp.len);
		const char *arn = j ? bfs_cjson_str(j, "RoleArn", NULL) : NULL;
		char *acct = arn ? strdup(bfs_credaws_role_name(arn)) : NULL;

		rc = bfs_credaws_json_creds(j, "Token", false, c->desc, acct, out, w, sizeof(w));
		free(acct);
		if (rc)
			snprintf(why, cap, "the container credentials endpoint: %s", w);
	}
	if (rc) {
		const char *secrets[] = { tok, c->token };

		bfs_cred_scrub(why, cap, secrets, 2);
	}
	bfs_http_resp_free(&resp);
	bfs_credaws_free_wiped(h);
	bfs_credaws_free_wiped(tok);
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
	if (bfs_credaws_url_split(url, host, sizeof(host), &path))
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

int bfs_credaws_container(struct chain *ch, struct bfs_cred_provider *out, bool *found)
{
	const char *rel = bfs_env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	const char *full = bfs_env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	struct container *c;
	char host[300], buf[400];
	const char *path;

	*found = false;
	if (!rel && !full) {
		bfs_credaws_looked(
			ch, "container credentials (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and "
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
	c->token_file = bfs_credaws_strdup(bfs_env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"));
	c->token = c->token_file ? NULL
				 : bfs_credaws_strdup(bfs_env("AWS_CONTAINER_AUTHORIZATION_TOKEN"));
	c->ca = bfs_credaws_strdup(ch->ca);
	if (c->url && bfs_credaws_url_split(c->url, host, sizeof(host), &path) == 0)
		snprintf(buf, sizeof(buf), "container credentials (%s://%s)",
			 strncasecmp(c->url, "https", 5) == 0 ? "https" : "http", host);
	else
		snprintf(buf, sizeof(buf), "container credentials");
	c->desc = strdup(buf);
	if (!c->url || !c->desc || (ch->ca && !c->ca) ||
	    (bfs_env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") && !c->token_file) ||
	    (!c->token_file && bfs_env("AWS_CONTAINER_AUTHORIZATION_TOKEN") && !c->token)) {
		container_free(c);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	*out = (struct bfs_cred_provider){
		.name = c->desc, .fetch = container_fetch, .ctx = c, .ctx_free = container_free
	};
	*found = true;
	return 0;
}
