/* SPDX-License-Identifier: Apache-2.0 */
/* s3ini.c — AWS's shared profile files (~/.aws/credentials, ~/.aws/config):
 * where they are and one section of one read. See s3ini.h. */
#include "s3ini.h"

#include "common.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PROFILE_FILE (1u << 20)

static void free_secret(char **p)
{
	if (*p) {
		explicit_bzero(*p, strlen(*p));
		free(*p);
		*p = NULL;
	}
}

void bfs_s3_ini_free(struct bfs_s3_ini *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->keys[i]);
		free_secret(&s->vals[i]);
	}
	free(s->keys);
	free(s->vals);
	memset(s, 0, sizeof(*s));
}

const char *bfs_s3_ini_get(const struct bfs_s3_ini *s, const char *key)
{
	for (size_t i = s->n; i-- > 0;) /* the last one given wins */
		if (strcmp(s->keys[i], key) == 0)
			return s->vals[i];
	return NULL;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		*--e = '\0';
	return s;
}

static int ini_add(struct bfs_s3_ini *s, const char *parent, const char *key, const char *val)
{
	char *k, *v;

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		char **nk = realloc(s->keys, cap * sizeof(*nk));

		if (!nk)
			return -ENOMEM;
		s->keys = nk;
		nk = realloc(s->vals, cap * sizeof(*nk));
		if (!nk)
			return -ENOMEM;
		s->vals = nk;
		s->cap = cap;
	}
	if (parent) {
		size_t n = strlen(parent) + strlen(key) + 2;

		k = malloc(n);
		if (k)
			snprintf(k, n, "%s.%s", parent, key);
	} else {
		k = strdup(key);
	}
	v = strdup(val);
	if (!k || !v) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	for (char *c = k; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	s->keys[s->n] = k;
	s->vals[s->n] = v;
	s->n++;
	return 0;
}

/* Parse text (modified) for section `want`. */
static int ini_parse(struct bfs_s3_ini *s, char *text, const char *want)
{
	bool in = false;
	char parent[128] = "";

	for (char *line = text, *next; line; line = next) {
		char *eq, *key, *val, *t;
		bool indented = line[0] == ' ' || line[0] == '\t';

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		t = trim(line);
		if (*t == '\0' || *t == '#' || *t == ';')
			continue;
		if (*t == '[') {
			char *end = strrchr(t, ']');

			if (!end)
				continue;
			*end = '\0';
			in = strcmp(trim(t + 1), want) == 0;
			s->found |= in;
			parent[0] = '\0';
			continue;
		}
		if (!in || !(eq = strchr(t, '=')))
			continue;
		*eq = '\0';
		key = trim(t);
		val = trim(eq + 1);
		if (indented && parent[0]) {
			if (ini_add(s, parent, key, val))
				return -ENOMEM;
			continue;
		}
		parent[0] = '\0';
		if (*val == '\0' && strlen(key) < sizeof(parent))
			snprintf(parent, sizeof(parent), "%s", key);
		else if (ini_add(s, NULL, key, val))
			return -ENOMEM;
	}
	return 0;
}

/* Load section `want` of path; a missing file is an empty one. */
int bfs_s3_ini_load(struct bfs_s3_ini *s, const char *path, const char *want)
{
	FILE *f = fopen(path, "r");
	char *text = NULL;
	size_t n;
	int rc;

	memset(s, 0, sizeof(*s));
	if (!f) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return bfs_err_set(-EINVAL, "cannot read %s: %s", path, strerror(errno));
	}
	text = malloc(MAX_PROFILE_FILE + 1);
	if (!text) {
		fclose(f);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	n = fread(text, 1, MAX_PROFILE_FILE + 1, f);
	rc = ferror(f);
	fclose(f);
	if (rc || n > MAX_PROFILE_FILE) {
		explicit_bzero(text, n);
		free(text);
		return bfs_err_set(-EINVAL, "cannot read %s: %s", path,
				   rc ? "read error" : "larger than 1 MiB");
	}
	text[n] = '\0';
	rc = ini_parse(s, text, want);
	explicit_bzero(text, n);
	free(text);
	if (rc) {
		bfs_s3_ini_free(s);
		return bfs_err_set(rc, "out of memory");
	}
	return 0;
}

/* $VAR, else ~/.aws/NAME; a leading "~/" is the home directory. */
int bfs_s3_profile_path(char *out, size_t cap, const char *var, const char *name)
{
	const char *v = bfs_env(var), *home = bfs_env("HOME");
	struct passwd pw, *res = NULL;
	char pwbuf[4096];
	int n;

	if (!home && getpwuid_r(getuid(), &pw, pwbuf, sizeof(pwbuf), &res) == 0 && res)
		home = pw.pw_dir;
	if (!home)
		home = "/";
	if (v && v[0] != '~')
		n = snprintf(out, cap, "%s", v);
	else if (v)
		n = snprintf(out, cap, "%s%s", home, v + 1);
	else
		n = snprintf(out, cap, "%s/.aws/%s", home, name);
	if (n < 0 || (size_t)n >= cap)
		return bfs_err_set(-EINVAL, "%s: the path of the %s file is too long",
				   v ? var : "HOME", name);
	return 0;
}
