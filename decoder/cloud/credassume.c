/* SPDX-License-Identifier: Apache-2.0 */
/* credassume.c — the AssumeRole provider: a profile's role_arn assumed
 * through STS (credsts.c), signed with its source's credentials. The chain
 * (credaws.c) builds it. */
#include "credaws_impl.h"

#include "common.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- AssumeRole (a profile's role_arn) ---- */

void bfs_credaws_assume_free(void *ctx)
{
	struct assume *a = ctx;

	if (!a)
		return;
	bfs_credaws_sts_destroy(&a->sts);
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

int bfs_credaws_assume_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap)
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
	bfs_credaws_form_add(&form, "Action", "AssumeRole");
	bfs_credaws_form_add(&form, "Version", "2011-06-15");
	bfs_credaws_form_add(&form, "RoleArn", a->role_arn);
	bfs_credaws_form_add(&form, "RoleSessionName", a->session);
	if (a->duration)
		bfs_credaws_form_add(&form, "DurationSeconds", a->duration);
	if (a->external_id)
		bfs_credaws_form_add(&form, "ExternalId", a->external_id);
	if (bfs_s3_str_take(&form, &body)) {
		bfs_cred_unref(src);
		snprintf(why, cap, "out of memory");
		return -ENOMEM;
	}
	rc = bfs_credaws_sts_call(&a->sts, "AssumeRole", body, src, a->desc,
				  bfs_credaws_role_name(a->role_arn), out, why, cap);
	bfs_credaws_free_wiped(body);
	bfs_cred_unref(src);
	return rc;
}
