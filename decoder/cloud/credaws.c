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
 * This file is the chain: it walks those places and builds their providers,
 * one file each: credassume.c, credwebid.c, credprocess.c, credcontainer.c,
 * credimds.c, over credsts.c (STS), credprofile.c (the profile) and
 * credawsutil.c (what they share). Every request goes through
 * bfs_http_request (http.c); STS's XML is parsed by s3xml.c; JSON (IMDS, the
 * container endpoint, credential_process) by cjson.c.
 */
#include "credaws.h"

#include "common.h"
#include "cred.h"
#include "credaws_impl.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_DEPTH 5 /* role_arn -> source_profile chains */

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

/* ---- building providers ---- */

static int provider_of_profile(struct chain *ch, const char *name, int depth,
			       struct bfs_cred_provider *out, char *desc, size_t desccap);

static int env_keys(struct bfs_cred **out)
{
	const char *id = bfs_env("AWS_ACCESS_KEY_ID"), *secret = bfs_env("AWS_SECRET_ACCESS_KEY");
	int rc;

	if (!id && !secret)
		return -ENOENT;
	if (!id || !secret)
		return bfs_err_set(-EINVAL, "%s is set but %s is not: set both, or neither",
				   id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
				   id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
	rc = bfs_cred_new(out, BFS_CRED_SIGV4, id, secret, bfs_env("AWS_SESSION_TOKEN"), 0,
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
	rc = bfs_credaws_profile_keys(p, 0, &c);
	if (rc == -ENOENT)
		rc = bfs_credaws_profile_keys(p, 1, &c);
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
		rc = bfs_credaws_imds(ch, out, &found);
	else if (strcasecmp(csrc, "EcsContainer") == 0)
		rc = bfs_credaws_container(ch, out, &found);
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
	const char *src = bfs_credaws_pget(p, "source_profile"),
		   *csrc = bfs_credaws_pget(p, "credential_source");
	struct assume *a = calloc(1, sizeof(*a));
	char buf[600];
	int rc;

	if (!a)
		return bfs_err_set(-ENOMEM, "out of memory");
	if (bfs_credaws_pget(p, "mfa_serial")) {
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
	a->role_arn = strdup(bfs_credaws_pget(p, "role_arn"));
	a->session = bfs_credaws_session_name(bfs_credaws_pget(p, "role_session_name"));
	a->external_id = bfs_credaws_strdup(bfs_credaws_pget(p, "external_id"));
	a->duration = bfs_credaws_strdup(bfs_credaws_pget(p, "duration_seconds"));
	snprintf(buf, sizeof(buf), "role `%s` via STS AssumeRole (profile '%s', %s)",
		 bfs_credaws_role_name(bfs_credaws_pget(p, "role_arn")), p->name,
		 a->source_desc ? a->source_desc : "");
	a->desc = strdup(buf);
	if (!a->source_desc || !a->role_arn || !a->session || !a->desc ||
	    (bfs_credaws_pget(p, "external_id") && !a->external_id) ||
	    (bfs_credaws_pget(p, "duration_seconds") && !a->duration) ||
	    bfs_credaws_sts_init(&a->sts, ch->region, ch->ca)) {
		rc = bfs_err_set(-ENOMEM, "out of memory");
		goto fail;
	}
	*out = (struct bfs_cred_provider){ .name = a->desc,
					   .fetch = bfs_credaws_assume_fetch,
					   .ctx = a,
					   .ctx_free = bfs_credaws_assume_free };
	return 0;
fail:
	bfs_credaws_assume_free(a);
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
	rc = bfs_credaws_profile_load(&p, name);
	if (rc)
		goto out;
	if (!p.cred.found && !p.conf.found) {
		rc = bfs_err_set(-EINVAL, "source_profile '%s' is in neither %s nor %s", name,
				 p.cred_path, p.conf_path);
		goto out;
	}
	if (bfs_credaws_pget(&p, "role_arn")) {
		rc = provider_assume(ch, &p, depth, out);
		goto out;
	}
	rc = bfs_credaws_profile_keys(&p, 0, &c);
	if (rc == -ENOENT)
		rc = bfs_credaws_profile_keys(&p, 1, &c);
	if (rc == 0) {
		static_provider(out, c);
		goto out;
	}
	if (rc != -ENOENT)
		goto out;
	if (bfs_credaws_pget(&p, "credential_process")) {
		struct process *pr = calloc(1, sizeof(*pr));
		char buf[300];

		snprintf(buf, sizeof(buf), "credential_process of profile '%s'", name);
		if (!pr || !(pr->command = strdup(bfs_credaws_pget(&p, "credential_process"))) ||
		    !(pr->desc = strdup(buf))) {
			bfs_credaws_process_free(pr);
			rc = bfs_err_set(-ENOMEM, "out of memory");
			goto out;
		}
		*out = (struct bfs_cred_provider){ .name = pr->desc,
						   .fetch = bfs_credaws_process_fetch,
						   .ctx = pr,
						   .ctx_free = bfs_credaws_process_free };
		rc = 0;
		goto out;
	}
	rc = bfs_err_set(-EINVAL, "source_profile '%s' has no credentials", name);
out:
	if (rc == 0 && desc)
		snprintf(desc, desccap, "%s", out->name);
	bfs_credaws_profile_free(&p);
	return rc;
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

	if (bfs_credaws_pget(p, "role_arn") && !bfs_credaws_pget(p, "web_identity_token_file"))
		return chain_keep(provider_assume(ch, p, 0, &pr), &pr, out, why, cap, rc);
	v = bfs_env("AWS_WEB_IDENTITY_TOKEN_FILE");
	if (v && bfs_env("AWS_ROLE_ARN"))
		return chain_keep(bfs_credaws_webid_make(ch, v, bfs_env("AWS_ROLE_ARN"),
							 bfs_env("AWS_ROLE_SESSION_NAME"),
							 "AWS_WEB_IDENTITY_TOKEN_FILE", &pr),
				  &pr, out, why, cap, rc);
	if (bfs_credaws_pget(p, "web_identity_token_file") && bfs_credaws_pget(p, "role_arn")) {
		char where[300];

		snprintf(where, sizeof(where), "profile '%s'", p->name);
		return chain_keep(bfs_credaws_webid_make(
					  ch, bfs_credaws_pget(p, "web_identity_token_file"),
					  bfs_credaws_pget(p, "role_arn"),
					  bfs_credaws_pget(p, "role_session_name"), where, &pr),
				  &pr, out, why, cap, rc);
	}
	bfs_credaws_looked(ch, "web identity (AWS_WEB_IDENTITY_TOKEN_FILE%s unset)",
			   v ? " set, AWS_ROLE_ARN" : "");
	return CHAIN_ON;
}

/* 4. SSO: out of scope, an error that says what to do instead. */
static int chain_sso(const struct profile *p)
{
	if (!bfs_credaws_pget(p, "sso_session") && !bfs_credaws_pget(p, "sso_start_url"))
		return 0;
	return bfs_err_set(-EACCES,
			   "profile '%s' gets its credentials through AWS IAM Identity Center "
			   "(%s), whose token cache (aws sso login) batchfs does not read: "
			   "export AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and "
			   "AWS_SESSION_TOKEN (aws configure export-credentials --format env "
			   "prints them), or use no_sign_request for a public bucket",
			   p->name,
			   bfs_credaws_pget(p, "sso_session") ? "sso_session" : "sso_start_url");
}

/* 5. the credentials file's keys; 6. credential_process; 7. the config
 * file's keys. */
static enum chain_end chain_profile_keys(struct chain *ch, struct profile *p, struct bfs_cred **c,
					 struct bfs_cred_keeper **out, char *why, size_t cap,
					 int *rc)
{
	struct bfs_cred_provider pr;

	*rc = bfs_credaws_profile_keys(p, 0, c);
	if (*rc == 0)
		return CHAIN_STATIC;
	if (*rc != -ENOENT)
		return CHAIN_FAIL;
	if (bfs_credaws_pget(p, "credential_process"))
		return chain_keep(provider_of_profile(ch, p->name, 0, &pr, NULL, 0), &pr, out, why,
				  cap, rc);
	*rc = bfs_credaws_profile_keys(p, 1, c);
	if (*rc == 0)
		return CHAIN_STATIC;
	if (*rc != -ENOENT)
		return CHAIN_FAIL;
	bfs_credaws_looked(ch, "profile '%s' in %s and %s (no keys, role or credential_process)",
			   p->name, p->cred_path, p->conf_path);
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
		profile = bfs_env("AWS_PROFILE");
	*rc = bfs_credaws_profile_load(p, profile ? profile : "default");
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

	*rc = bfs_credaws_container(ch, &pr, &found);
	if (*rc)
		return CHAIN_FAIL;
	if (found)
		return chain_keep(0, &pr, out, why, cap, rc);
	*rc = bfs_credaws_imds(ch, &pr, &found);
	if (*rc)
		return CHAIN_FAIL;
	if (!found)
		return CHAIN_ON;
	*rc = keep(out, &pr, why, cap);
	if (*rc && *rc != -ENOMEM) { /* as botocore: no credentials there */
		bfs_credaws_looked(ch, "%s", why);
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
		bfs_credaws_looked(&ch, "the environment (AWS_ACCESS_KEY_ID unset)");
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
	bfs_credaws_profile_free(&p);
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
			profile = bfs_env("AWS_PROFILE");
		rc = bfs_credaws_profile_load(&p, profile ? profile : "default");
		if (rc == 0 && profile && !p.cred.found && !p.conf.found)
			rc = bfs_err_set(-EINVAL, "profile '%s' is in neither %s nor %s", p.name,
					 p.cred_path, p.conf_path);
		if (rc == 0)
			rc = bfs_credaws_profile_keys(&p, 0, &c);
		if (rc == -ENOENT)
			rc = bfs_credaws_profile_keys(&p, 1, &c);
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
	bfs_credaws_profile_free(&p);
	return rc;
}
