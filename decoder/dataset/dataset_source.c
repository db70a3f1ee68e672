/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dataset_source.c — SOURCE to shard paths: a file, a directory's files
 * (passing over the files that are not shards: dataset.h), or a glob, in
 * name order; and the names a directory passes over, for README.txt.
 *
 * Does not: open shards or read them.
 */
#include "dataset_impl.h"

#include <dirent.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void bfs_source_free(char **paths, size_t n)
{
	if (!paths)
		return;
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

int bfs_source_strcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int bfs_source_push(char ***v, size_t *n, size_t *cap, const char *p)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		char **nv = realloc(*v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[*n] = strdup(p);
	if (!(*v)[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* Is `path` (a symlink inside dir `root`) leading outside root? */
static bool leads_outside(const char *root_real, const char *path)
{
	char real[PATH_MAX];
	size_t rl = strlen(root_real);

	if (!realpath(path, real))
		return true;
	return !(strncmp(real, root_real, rl) == 0 && (real[rl] == '/' || real[rl] == '\0'));
}

bool bfs_source_not_shard(const char *name)
{
	/* .shadow: batchfs's own plain copies of compressed shards, when
	 * index_dir is the source folder itself */
	static const char *const ext[] = { ".json",  ".txt", ".md",    ".crc",
					   ".pbtxt", ".idx", ".shadow" };
	size_t n = strlen(name);

	if (name[0] == '_')
		return true;
	for (size_t i = 0; i < BFS_ARRAY_SIZE(ext); i++) {
		size_t e = strlen(ext[i]);
		if (n >= e && strcmp(name + n - e, ext[i]) == 0)
			return true;
	}
	return false;
}

int bfs_source_passed_over(char ***out, size_t *nout, const char *dir)
{
	char **v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int rc = 0;

	*out = NULL;
	*nout = 0;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return 0;
	d = opendir(dir);
	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL && !rc)
		if (de->d_name[0] != '.' && bfs_source_not_shard(de->d_name))
			rc = bfs_source_push(&v, &n, &cap, de->d_name);
	closedir(d);
	if (rc) {
		bfs_source_free(v, n);
		return rc;
	}
	if (n)
		qsort(v, n, sizeof(*v), bfs_source_strcmp);
	*out = v;
	*nout = n;
	return 0;
}

static int resolve_dir(char ***v, size_t *n, size_t *cap, const char *dir, bool follow)
{
	char root_real[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (!realpath(dir, root_real))
		return bfs_err_set(-errno, "%s: %s", dir, strerror(errno));
	d = opendir(dir);
	if (!d)
		return bfs_err_set(-errno, "%s: %s", dir, strerror(errno));
	while ((de = readdir(d)) != NULL && !rc) {
		char path[PATH_MAX];
		struct stat st, lst;

		if (de->d_name[0] == '.' || bfs_source_not_shard(de->d_name))
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= sizeof(path))
			continue;
		if (lstat(path, &lst) != 0)
			continue;
		if (S_ISLNK(lst.st_mode)) {
			if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
				continue;
			if (!follow && leads_outside(root_real, path)) {
				rc = bfs_err_set(-ELOOP,
						 "%s: symlink leads outside the source directory "
						 "(use -o follow_symlinks to allow it)",
						 path);
				break;
			}
		} else if (!S_ISREG(lst.st_mode)) {
			continue;
		}
		rc = bfs_source_push(v, n, cap, path);
	}
	closedir(d);
	return rc;
}

int bfs_source_resolve(char ***out, size_t *nout, const char *source, bool follow)
{
	char **v = NULL;
	size_t n = 0, cap = 0;
	struct stat st;
	int rc = 0;

	if (stat(source, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			rc = resolve_dir(&v, &n, &cap, source, follow);
		else if (S_ISREG(st.st_mode))
			rc = bfs_source_push(&v, &n, &cap, source);
		else
			rc = bfs_err_set(-EINVAL, "%s: not a regular file or directory", source);
	} else if (strpbrk(source, "*?[")) {
		glob_t g;
		int grc = glob(source, 0, NULL, &g);

		if (grc == 0) {
			for (size_t i = 0; i < g.gl_pathc && !rc; i++) {
				if (stat(g.gl_pathv[i], &st) == 0 && S_ISREG(st.st_mode))
					rc = bfs_source_push(&v, &n, &cap, g.gl_pathv[i]);
			}
			globfree(&g);
		} else if (grc != GLOB_NOMATCH) {
			rc = bfs_err_set(-EIO, "%s: glob failed", source);
		}
	} else {
		rc = bfs_err_set(-errno, "%s: %s", source, strerror(errno));
	}
	if (!rc && n == 0)
		rc = bfs_err_set(-ENOENT, "%s: no shard files found", source);
	if (rc) {
		bfs_source_free(v, n);
		return rc;
	}
	qsort(v, n, sizeof(*v), bfs_source_strcmp);
	*out = v;
	*nout = n;
	return 0;
}
