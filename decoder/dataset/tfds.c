/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tfds.c — what a TFDS dataset version folder holds: its splits, the glob
 * of a split's shards, its features.json (see tfds.h).
 */
#include "tfds.h"

#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TFDS_FILE_MAX ((size_t)16 << 20) /* features.json, a labels file */

static bool file_exists(const char *dir, const char *name)
{
	char p[PATH_MAX];
	struct stat st;

	return (size_t)snprintf(p, sizeof(p), "%s/%s", dir, name) < sizeof(p) &&
	       stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

bool bfs_tfds_is_dir(const char *dir)
{
	struct stat st;

	return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) &&
	       file_exists(dir, "dataset_info.json") && file_exists(dir, "features.json");
}

/* The split of a shard's name NAME-SPLIT.tfrecord-*, malloc'd; NULL when
 * the name is not a shard's (or no memory). */
static char *split_of(const char *name)
{
	const char *t = strstr(name, ".tfrecord"), *dash = NULL;

	if (!t || name[0] == '.')
		return NULL;
	for (const char *q = name; q < t; q++)
		if (*q == '-')
			dash = q;
	if (!dash || dash + 1 == t)
		return NULL;
	return strndup(dash + 1, (size_t)(t - dash - 1));
}

/* names[0, n) as "a, b" (malloc'd; "none" for none) */
static char *join(char **names, size_t n)
{
	char *out = strdup(n ? "" : "none");

	for (size_t i = 0; out && i < n; i++) {
		char *t = NULL;
		if (asprintf(&t, "%s%s%s", out, i ? ", " : "", names[i]) < 0)
			t = NULL;
		free(out);
		out = t;
	}
	return out;
}

char *bfs_tfds_splits(const char *dir)
{
	char **names = NULL, *out = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return NULL;
	while ((de = readdir(d)) != NULL) {
		char *split = split_of(de->d_name);
		bool dup = false;

		for (size_t i = 0; split && i < n; i++)
			dup = dup || strcmp(names[i], split) == 0;
		if (!split || dup) {
			free(split);
			continue;
		}
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 8) * sizeof(*nn));
			if (!nn) {
				free(split);
				break;
			}
			names = nn;
		}
		names[n++] = split;
	}
	closedir(d);
	for (size_t i = 0; i < n; i++) /* sort: few names */
		for (size_t j = i + 1; j < n; j++)
			if (strcmp(names[j], names[i]) < 0) {
				char *t = names[i];
				names[i] = names[j];
				names[j] = t;
			}
	out = join(names, n);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return out;
}

bool bfs_tfds_split_listed(const char *list, const char *split)
{
	size_t n = strlen(split);

	for (const char *p = list; (p = strstr(p, split)) != NULL; p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

int bfs_tfds_glob(char *out, size_t cap, const char *dir, const char *split)
{
	return (size_t)snprintf(out, cap, "%s/*-%s.tfrecord*", dir, split) < cap ? 0
										 : -ENAMETOOLONG;
}

/* bfs_labels_fn: dir/FEATURE.labels.txt, malloc'd, or NULL */
static char *labels_file(void *ctx, const char *feature)
{
	char p[PATH_MAX];
	size_t len;

	if ((size_t)snprintf(p, sizeof(p), "%s/%s.labels.txt", (const char *)ctx, feature) >=
	    sizeof(p))
		return NULL;
	return bfs_read_file(p, TFDS_FILE_MAX, &len);
}

int bfs_tfds_refine(struct bfs_schema *s, const char *dir)
{
	char fj[PATH_MAX + 32];
	size_t len;
	char *text;
	int rc;

	snprintf(fj, sizeof(fj), "%s/features.json", dir);
	text = bfs_read_file(fj, TFDS_FILE_MAX, &len);
	rc = text ? bfs_schema_apply_tfds(s, text, len, labels_file, (void *)dir)
		  : bfs_err_set(-EIO, "cannot read it");
	free(text);
	if (rc)
		bfs_err_prefix("%s", fj);
	return rc;
}
