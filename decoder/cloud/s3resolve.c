/* SPDX-License-Identifier: Apache-2.0 */
/* s3resolve.c — a mount's object-store configuration resolved from its
 * options, the environment and the profile files, and its credentials from
 * the clouds' chains (credaws.h, credgcp.h). See s3.h,
 * bfs_s3_config_resolve. */
#include "s3.h"

#include "common.h"
#include "cred.h"
#include "credaws.h"
#include "credgcp.h"
#include "s3_impl.h"
#include "s3ini.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		/* credgcpchain.c is linked in (a weak reference would not pull it out
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

	r->profile = opt->profile ? opt->profile : bfs_env("AWS_PROFILE");
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
		region = bfs_env("AWS_REGION");
	if (!region)
		region = bfs_env("AWS_DEFAULT_REGION");
	if (!region)
		region = bfs_s3_ini_get(&r->conf, "region");
	if (!region || !*region)
		region = scheme == BFS_S3_SCHEME_GS ? "auto" : "us-east-1";
	if (!region_ok(region))
		return bfs_err_set(-EINVAL, "region '%.100s': not a region name", region);
	if ((rc = set_str(&r->c.region, region)))
		return rc;

	if (scheme == BFS_S3_SCHEME_S3 && !endpoint) {
		endpoint = bfs_env("AWS_ENDPOINT_URL_S3");
		if (!endpoint)
			endpoint = bfs_env("AWS_ENDPOINT_URL");
		if (!endpoint)
			endpoint = bfs_s3_ini_get(&r->conf, "s3.endpoint_url");
		if (!endpoint)
			endpoint = bfs_s3_ini_get(&r->conf, "endpoint_url");
	}
	if (endpoint && *endpoint) {
		if ((rc = bfs_s3_endpoint_normal(&r->c.endpoint, endpoint)))
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

	if (bfs_env("AWS_CA_BUNDLE") && (rc = set_str(&r->c.ca_file, bfs_env("AWS_CA_BUNDLE"))))
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
	const char *v = bfs_env("AWS_MAX_ATTEMPTS");
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
