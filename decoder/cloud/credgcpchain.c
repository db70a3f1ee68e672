/* SPDX-License-Identifier: Apache-2.0 */
/* credgcpchain.c — Google's Application Default Credentials as a chain:
 * where they are (bfs_gcp_adc_find) and a keeper over the provider
 * (credgcptoken.c) for the first place that has them (bfs_credgcp_chain).
 * See credgcp.h. */
#include "credgcp_impl.h"

#include "common.h"
#include "cred.h"
#include "credgcp.h"
#include "http.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <pwd.h>
#include <string.h>
#include <unistd.h>

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
		if ((rc = bfs_credgcp_dup_to(&s.via, "GOOGLE_APPLICATION_CREDENTIALS"))) {
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
		if ((rc = bfs_credgcp_dup_to(&s.via, "the gcloud ADC file"))) {
			bfs_gcp_source_destroy(&s);
			return rc;
		}
		*out = s;
		return 0;
	}
	if (rc != -ENOENT)
		return rc;
	s.kind = BFS_GCP_METADATA;
	if ((rc = bfs_credgcp_dup_to(&s.metadata_host, host ? host : BFS_GCP_METADATA_HOST)) ||
	    (rc = bfs_credgcp_dup_to(&s.via,
				     host ? (bfs_env("GCE_METADATA_HOST") ? "GCE_METADATA_HOST"
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

int bfs_credgcp_chain(struct bfs_cred_keeper **out, const char *ca_file, char *looked, size_t cap)
{
	struct bfs_cred_provider p = { .fetch = bfs_credgcp_fetch,
				       .ctx_free = bfs_credgcp_ctx_free };
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
		bfs_credgcp_ctx_free(c);
		return rc;
	}
	if (ca_file && !(c->ca_file = strdup(ca_file))) {
		bfs_credgcp_ctx_free(c);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	bfs_gcp_source_describe(&c->src, c->source, sizeof(c->source));
	if (c->src.client_email)
		snprintf(c->account, sizeof(c->account), "%s", c->src.client_email);
	c->probing = true;
	rc = bfs_credgcp_fetch(c, &first, why, sizeof(why));
	c->probing = false;
	if (rc == -ENOENT) {
		if (looked)
			snprintf(looked, cap, "%s (%s)", places, why);
		bfs_credgcp_ctx_free(c);
		return -ENOENT;
	}
	if (rc) {
		rc = bfs_err_set(rc, "Google credentials from %s: %s", c->source, why);
		bfs_credgcp_ctx_free(c);
		return rc;
	}
	if (c->src.kind == BFS_GCP_METADATA) {
		bfs_credgcp_metadata_email(c);
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
