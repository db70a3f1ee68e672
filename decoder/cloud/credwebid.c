/* SPDX-License-Identifier: Apache-2.0 */
/* credwebid.c — the web identity provider: STS AssumeRoleWithWebIdentity
 * (credsts.c), unsigned, the token in the body, its file read again at each
 * refresh (it rotates). */
#include "credaws_impl.h"

#include "common.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
	bfs_credaws_sts_destroy(&w->sts);
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

	rc = bfs_credaws_read_small(w->token_file, MAX_TOKEN_FILE, &tok, why, cap);
	if (rc)
		return rc == -ENOENT ? -EIO : rc; /* named, so there: a missing file is an error */
	bfs_credaws_form_add(&form, "Action", "AssumeRoleWithWebIdentity");
	bfs_credaws_form_add(&form, "Version", "2011-06-15");
	bfs_credaws_form_add(&form, "RoleArn", w->role_arn);
	bfs_credaws_form_add(&form, "RoleSessionName", w->session);
	bfs_credaws_form_add(&form, "WebIdentityToken", tok);
	if (bfs_s3_str_take(&form, &body)) {
		bfs_credaws_free_wiped(tok);
		snprintf(why, cap, "out of memory");
		return -ENOMEM;
	}
	rc = bfs_credaws_sts_call(&w->sts, "AssumeRoleWithWebIdentity", body, NULL, w->desc,
				  bfs_credaws_role_name(w->role_arn), out, why, cap);
	if (rc) {
		const char *secrets[] = { tok };

		bfs_cred_scrub(why, cap, secrets, 1);
	}
	bfs_credaws_free_wiped(body);
	bfs_credaws_free_wiped(tok);
	return rc;
}

int bfs_credaws_webid_make(struct chain *ch, const char *file, const char *arn, const char *session,
			   const char *where, struct bfs_cred_provider *out)
{
	struct webid *w = calloc(1, sizeof(*w));
	char buf[600];

	if (!w)
		return bfs_err_set(-ENOMEM, "out of memory");
	snprintf(buf, sizeof(buf), "role `%s` via STS AssumeRoleWithWebIdentity (%s)",
		 bfs_credaws_role_name(arn), where);
	w->token_file = strdup(file);
	w->role_arn = strdup(arn);
	w->session = bfs_credaws_session_name(session);
	w->desc = strdup(buf);
	if (!w->token_file || !w->role_arn || !w->session || !w->desc ||
	    bfs_credaws_sts_init(&w->sts, ch->region, ch->ca)) {
		webid_free(w);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	*out = (struct bfs_cred_provider){
		.name = w->desc, .fetch = webid_fetch, .ctx = w, .ctx_free = webid_free
	};
	return 0;
}
