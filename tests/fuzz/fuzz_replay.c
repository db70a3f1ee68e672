/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_replay.c — replays every committed corpus file through its fuzz target
 * with a plain main(), so each make check runs the corpora under gcc (and
 * under the sanitizers in a --enable-sanitizers build). A crash is a failure.
 *
 *   fuzz_replay                 every file in SRCDIR/tests/fuzz/corpus/<name>/
 *   fuzz_replay NAME FILE...    the given files through one target
 *
 * Targets written elsewhere are declared weak: one that is not linked in yet
 * is skipped.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef SRCDIR
#define SRCDIR "."
#endif

int bfs_fuzz_record(const uint8_t *data, size_t size) __attribute__((weak));
int bfs_fuzz_example(const uint8_t *data, size_t size) __attribute__((weak));
int bfs_fuzz_schema(const uint8_t *data, size_t size) __attribute__((weak));
int bfs_fuzz_wire(const uint8_t *data, size_t size) __attribute__((weak));
int bfs_fuzz_batch(const uint8_t *data, size_t size) __attribute__((weak));
int bfs_fuzz_options(const uint8_t *data, size_t size) __attribute__((weak));
int bfs_fuzz_image(const uint8_t *data, size_t size) __attribute__((weak));
int bfs_fuzz_index(const uint8_t *data, size_t size) __attribute__((weak));
int bfs_fuzz_ixpack(const uint8_t *data, size_t size) __attribute__((weak));
int bfs_fuzz_counts(const uint8_t *data, size_t size) __attribute__((weak));
int bfs_fuzz_s3list(const uint8_t *data, size_t size) __attribute__((weak));
int bfs_fuzz_s3resp(const uint8_t *data, size_t size) __attribute__((weak));
int bfs_fuzz_mixfile(const uint8_t *data, size_t size) __attribute__((weak));

typedef int (*fuzz_fn)(const uint8_t *data, size_t size);

/* A weak function not linked in has the address NULL. */
static const struct {
	const char *name;
	fuzz_fn fn;
} targets[] = {
	{ "record", bfs_fuzz_record },	 { "example", bfs_fuzz_example },
	{ "schema", bfs_fuzz_schema },	 { "wire", bfs_fuzz_wire },
	{ "batch", bfs_fuzz_batch },	 { "options", bfs_fuzz_options },
	{ "image", bfs_fuzz_image },	 { "index", bfs_fuzz_index },
	{ "ixpack", bfs_fuzz_ixpack },	 { "counts", bfs_fuzz_counts },
	{ "s3list", bfs_fuzz_s3list },	 { "s3resp", bfs_fuzz_s3resp },
	{ "mixfile", bfs_fuzz_mixfile },
};

static int replay_file(fuzz_fn fn, const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f) {
		perror(path);
		return -1;
	}
	for (;;) {
		size_t got;

		if (n == cap) {
			uint8_t *p;
			cap = cap ? cap * 2 : 4096;
			p = realloc(buf, cap);
			if (!p) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = p;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
	}
	fclose(f);
	fn(buf, n);
	free(buf);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replay every regular file of SRCDIR/tests/fuzz/corpus/<name>, sorted. */
static int replay_dir(const char *name, fuzz_fn fn, size_t *count)
{
	char dir[4096], path[8192];
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int rc = 0;

	snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", SRCDIR, name);
	d = opendir(dir);
	if (!d)
		return 0; /* no corpus yet */
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **p;
			cap = cap ? cap * 2 : 64;
			p = realloc(names, cap * sizeof(*names));
			if (!p) {
				rc = -1;
				break;
			}
			names = p;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			rc = -1;
			break;
		}
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (rc == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (replay_file(fn, path) != 0)
				rc = -1;
			else
				(*count)++;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	int rc = 0;

	if (argc >= 2) {
		for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
			fuzz_fn fn = targets[i].fn;

			if (strcmp(argv[1], targets[i].name) != 0)
				continue;
			if (!fn) {
				fprintf(stderr, "fuzz_replay: %s: target not linked in\n", argv[1]);
				return 2;
			}
			for (int a = 2; a < argc; a++)
				if (replay_file(fn, argv[a]) != 0)
					rc = 1;
			printf("fuzz_replay: %s: %d inputs\n", argv[1], argc - 2);
			return rc;
		}
		fprintf(stderr,
			"usage: fuzz_replay [record|example|schema|wire|batch|options FILE...]\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		fuzz_fn fn = targets[i].fn;
		size_t count = 0;

		if (!fn) {
			printf("fuzz_replay: %s: skipped (target not linked in)\n",
			       targets[i].name);
			continue;
		}
		if (replay_dir(targets[i].name, fn, &count) != 0)
			rc = 1;
		printf("fuzz_replay: %s: %zu inputs\n", targets[i].name, count);
	}
	return rc;
}
