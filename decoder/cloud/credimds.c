/* SPDX-License-Identifier: Apache-2.0 */
/* credimds.c — the instance metadata service provider, IMDSv2 (a session
 * token first; IMDSv1 only when the token request is refused with 403, 404
 * or 405), and its environment (AWS_EC2_METADATA_*,
 * AWS_METADATA_SERVICE_*). */
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

#define IMDS_DEFAULT "http://169.254.169.254"
#define IMDS_DEFAULT6 "http://[fd00:ec2::254]"
#define IMDS_TTL "21600"

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
		if (!(h = bfs_credaws_hdr("X-aws-ec2-metadata-token", token)))
			return -ENOMEM;
		req.headers = (const char *const *)&h;
		req.nheaders = 1;
	}
	rc = bfs_http_request(&req, resp, w, sizeof(w));
	bfs_credaws_free_wiped(h);
	if (rc) {
		snprintf(why, cap, "the instance metadata service: %s", w);
		return bfs_credaws_http_errno(rc);
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
		return bfs_credaws_http_errno(rc);
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
	rc = bfs_credaws_json_creds(bfs_credaws_json_object(resp.body, resp.len), "Token", false,
				    desc, role, out, w, sizeof(w));
	if (rc)
		snprintf(why, cap, "the instance metadata service: %s", w);
out:
	if (rc) {
		const char *secrets[] = { token };

		bfs_cred_scrub(why, cap, secrets, 1);
	}
	bfs_http_resp_free(&resp);
	bfs_credaws_free_wiped(token);
	return rc;
}

static unsigned env_uint(const char *name, unsigned def, unsigned max)
{
	const char *v = bfs_env(name);
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
int bfs_credaws_imds(struct chain *ch, struct bfs_cred_provider *out, bool *found)
{
	const char *ep = bfs_env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	const char *mode = bfs_env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
	struct imds *m;
	size_t n;

	*found = false;
	if (bfs_credaws_truthy(bfs_env("AWS_EC2_METADATA_DISABLED"))) {
		bfs_credaws_looked(ch, "the instance metadata service (AWS_EC2_METADATA_DISABLED)");
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
	m->v1_disabled = bfs_credaws_truthy(bfs_env("AWS_EC2_METADATA_V1_DISABLED"));
	*out = (struct bfs_cred_provider){
		.name = m->desc, .fetch = imds_fetch, .ctx = m, .ctx_free = imds_free
	};
	*found = true;
	return 0;
}
