/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3ini.h — AWS's shared profile files (~/.aws/credentials and
 * ~/.aws/config, botocore's format): one section of one file, read. The
 * object-store configuration (s3resolve.c) and the AWS credential providers
 * read them.
 */
#ifndef BFS_S3INI_H
#define BFS_S3INI_H

#include <stdbool.h>
#include <stddef.h>

/* A profile file's one section, its keys lower-cased; a key indented under
 * "parent =" (with nothing after the '=') is "parent.key". Values may be
 * secrets: bfs_s3_ini_free wipes them. */
struct bfs_s3_ini {
	char **keys, **vals;
	size_t n, cap;
	bool found; /* the section is in the file */
};

/* Load section `want` ("default", "profile dev", "sso-session x") of the
 * file at path; a missing file is an empty one. 0, -EINVAL (unreadable, over
 * 1 MiB: with a message), -ENOMEM. */
int bfs_s3_ini_load(struct bfs_s3_ini *s, const char *path, const char *want);
/* The value of key (lower-case) in s, the last one given; NULL if none. */
const char *bfs_s3_ini_get(const struct bfs_s3_ini *s, const char *key);
void bfs_s3_ini_free(struct bfs_s3_ini *s);
/* $var, else ~/.aws/name; a leading "~/" is the home directory. */
int bfs_s3_profile_path(char *out, size_t cap, const char *var, const char *name);

#endif
