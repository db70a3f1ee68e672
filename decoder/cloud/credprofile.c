/* SPDX-License-Identifier: Apache-2.0 */
/* credprofile.c — an AWS profile: its sections of the credentials and
 * config files (s3ini.h), and the keys it holds. */
#include "credaws_impl.h"

#include "common.h"
#include "s3ini.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <limits.h>

/* ---- the profile ---- */

void bfs_credaws_profile_free(struct profile *p)
{
	bfs_s3_ini_free(&p->cred);
	bfs_s3_ini_free(&p->conf);
}

int bfs_credaws_profile_load(struct profile *p, const char *name)
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
const char *bfs_credaws_pget(const struct profile *p, const char *key)
{
	const char *v = bfs_s3_ini_get(&p->cred, key);

	return v ? v : bfs_s3_ini_get(&p->conf, key);
}

/* Static keys in one of the profile's files (i: 0 credentials, 1 config).
 * -ENOENT when it has none. */
int bfs_credaws_profile_keys(const struct profile *p, int i, struct bfs_cred **out)
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
