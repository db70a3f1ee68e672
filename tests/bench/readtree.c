/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readtree — read every regular file under a directory, in sorted order,
 * with large reads, and report what it read and how fast. The benchmark
 * reads a batchfs mount and the null filesystem with this same program, so
 * both are read the same way.
 *
 *   readtree [--bs BYTES] [--only SUFFIX] [--exclude NAME]... [--maxdepth N]
 *            [--manifest OUT] DIR
 *   readtree [--bs BYTES] FILE
 *
 * Given a regular FILE instead of a DIR, it reads that one file from start
 * to end (e.g. epoch-0000/all.safetensors): files is 1.
 *
 * Order: the entries of each directory sorted by name with strcmp; a
 * directory's contents are read where its name falls in that order (depth
 * first), so "batch-000000/" is read before "batch-000000.safetensors".
 * --bs        read size (default 1 MiB; one buffer, read(2) until EOF)
 * --only SUF  read only files whose name ends with SUF (e.g. .safetensors)
 * --exclude NAME  skip every entry (file or directory) named exactly NAME,
 *             at any depth (e.g. --exclude all --exclude all.safetensors reads
 *             only the batches of a batchfs epoch folder); up to 16
 * --maxdepth N  go no deeper than N levels below DIR (1: DIR's own entries,
 *             as a reader globbing "DIR/" "*.safetensors" does); at the deepest
 *             level a name --only does not want is skipped without a stat
 * --manifest  do not read; write "SIZE RELPATH" per file (from stat) to OUT,
 *             in the order they would be read (nullfs takes this file)
 * --seconds S stop reading after S seconds (a source too slow to read all
 *             of in a benchmark); "stopped": true then says so
 * Output: one JSON line: files, bytes, seconds, MB_s (10^6 bytes/s), stopped.
 * Exit status: 0 ok, 1 an I/O error (named on stderr), 2 usage.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct walk {
	char *buf;
	size_t bs;
	const char *only;
	const char *exclude[16];
	int nexclude;
	int maxdepth; /* 0: no limit */
	FILE *manifest;
	size_t rootlen, skip; /* skip: bytes of a path before its manifest name */
	uint64_t files, bytes;
	double deadline; /* CLOCK_MONOTONIC seconds; 0: none */
	bool stopped; /* the deadline came */
};

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool past_deadline(struct walk *w)
{
	if (w->deadline > 0 && mono() >= w->deadline)
		w->stopped = true;
	return w->stopped;
}

static int cmp_names(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static bool wanted(const struct walk *w, const char *name)
{
	size_t n, k;

	if (!w->only)
		return true;
	n = strlen(name);
	k = strlen(w->only);
	return n >= k && strcmp(name + n - k, w->only) == 0;
}

static bool excluded(const struct walk *w, const char *name)
{
	for (int i = 0; i < w->nexclude; i++)
		if (strcmp(name, w->exclude[i]) == 0)
			return true;
	return false;
}

static int read_file(struct walk *w, const char *path, const struct stat *st)
{
	int fd;
	ssize_t r;

	if (w->manifest) {
		fprintf(w->manifest, "%jd %s\n", (intmax_t)st->st_size, path + w->skip);
		w->files++;
		w->bytes += (uint64_t)st->st_size;
		return 0;
	}
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "readtree: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		r = read(fd, w->buf, w->bs);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "readtree: %s: %s\n", path, strerror(errno));
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		w->bytes += (uint64_t)r;
		if (past_deadline(w))
			break;
	}
	close(fd);
	w->files++;
	return 0;
}

static int walk_dir(struct walk *w, const char *dir, int depth)
{
	bool deepest = w->maxdepth && depth >= w->maxdepth;

	struct dirent **ents = NULL;
	int n = scandir(dir, &ents, NULL, cmp_names);
	int rc = 0;

	if (n < 0) {
		fprintf(stderr, "readtree: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const char *name = ents[i]->d_name;
		char *path = NULL;
		struct stat st;

		if (rc || w->stopped || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
		    excluded(w, name) || (deepest && !wanted(w, name)))
			goto next;
		if (asprintf(&path, "%s/%s", dir, name) < 0) {
			rc = -1;
			goto next;
		}
		if (stat(path, &st) != 0) {
			fprintf(stderr, "readtree: %s: %s\n", path, strerror(errno));
			rc = -1;
		} else if (S_ISDIR(st.st_mode)) {
			if (!deepest)
				rc = walk_dir(w, path, depth + 1);
		} else if (S_ISREG(st.st_mode) && wanted(w, name)) {
			rc = read_file(w, path, &st);
		}
next:
		free(path);
		free(ents[i]);
	}
	free(ents);
	return rc;
}

static void usage(void)
{
	fprintf(stderr, "usage: readtree [--bs BYTES] [--only SUFFIX] [--exclude NAME]... "
			"[--maxdepth N] [--manifest OUT] [--seconds S] DIR|FILE\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct walk w = { .bs = 1 << 20 };
	const char *root = NULL, *manifest = NULL;
	struct timespec t0, t1;
	double secs, limit = 0;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--bs") == 0 && i + 1 < argc)
			w.bs = strtoull(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
			w.only = argv[++i];
		else if (strcmp(argv[i], "--exclude") == 0 && i + 1 < argc && w.nexclude < 16)
			w.exclude[w.nexclude++] = argv[++i];
		else if (strcmp(argv[i], "--maxdepth") == 0 && i + 1 < argc)
			w.maxdepth = atoi(argv[++i]);
		else if (strcmp(argv[i], "--manifest") == 0 && i + 1 < argc)
			manifest = argv[++i];
		else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
			limit = strtod(argv[++i], NULL);
		else if (argv[i][0] == '-' || root)
			usage();
		else
			root = argv[i];
	}
	if (!root || w.bs == 0)
		usage();
	w.rootlen = strlen(root);
	while (w.rootlen > 1 && root[w.rootlen - 1] == '/')
		w.rootlen--;
	if (manifest) {
		w.manifest = fopen(manifest, "w");
		if (!w.manifest) {
			fprintf(stderr, "readtree: %s: %s\n", manifest, strerror(errno));
			return 1;
		}
	} else if (posix_memalign((void **)&w.buf, 4096, w.bs) != 0) {
		fprintf(stderr, "readtree: out of memory\n");
		return 1;
	}
	w.skip = w.rootlen + 1;
	char *top = strndup(root, w.rootlen);
	if (!top)
		return 1;
	struct stat st;
	if (stat(top, &st) != 0) {
		fprintf(stderr, "readtree: %s: %s\n", top, strerror(errno));
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (limit > 0)
		w.deadline = mono() + limit;
	if (S_ISREG(st.st_mode)) {
		const char *slash = strrchr(top, '/');

		w.skip = slash ? (size_t)(slash - top) + 1 : 0; /* a manifest names the file */
		rc = read_file(&w, top, &st);
	} else {
		rc = walk_dir(&w, top, 1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	free(top);
	free(w.buf);
	if (w.manifest && fclose(w.manifest) != 0) {
		fprintf(stderr, "readtree: %s: %s\n", manifest, strerror(errno));
		rc = -1;
	}
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("{\"files\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"seconds\": %.6f, "
	       "\"MB_s\": %.2f, \"stopped\": %s}\n",
	       w.files, w.bytes, secs, secs > 0 ? (double)w.bytes / secs / 1e6 : 0.0,
	       w.stopped ? "true" : "false");
	return rc ? 1 : 0;
}
