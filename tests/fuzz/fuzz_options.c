/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_options.c — fuzz target for the mount's option parsing
 * (mount/options.c, libfuse's fuse_opt underneath).
 *
 * The input, split at NUL bytes, is the argument vector after the program
 * name (at most 32 arguments). Invariants on success: libfuse's argument
 * vector starts with the program name; the parsed values are in range
 * (batch_size > 0, rank < world, prefetch set); the description of the
 * effective options parses again, with SOURCE and MOUNTPOINT, and describes
 * the same options. Any result but a crash is fine on failure; the parser
 * prints one line to stderr then.
 *
 * bfs_fuzz_options() is called by fuzz_replay.c (plain main, every make
 * check) and, built with -DBFS_LIBFUZZER, by LLVMFuzzerTestOneInput.
 */
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bfs_fuzz_options(const uint8_t *data, size_t size);

#define MAX_ARGS 32

#define FUZZ_ASSERT(cond)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_options: %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static void check_roundtrip(const struct bfs_options *o, const char *desc)
{
	struct bfs_options o2;
	/* "--": a SOURCE or MOUNTPOINT that looks like an option stays positional */
	char *argv[] = { "batchfs", "-o", (char *)desc, "--", o->source, o->mountpoint, NULL };
	int fargc = 0;
	char **fargv = NULL;

	if (bfs_options_parse(&o2, 6, argv, &fargc, &fargv) == 0) {
		char *d2 = bfs_options_describe(&o2);

		FUZZ_ASSERT(d2);
		if (strcmp(desc, d2) != 0) {
			fprintf(stderr, "fuzz_options: '%s' reparsed as '%s'\n", desc, d2);
			abort();
		}
		free(d2);
		bfs_options_free_argv(fargc, fargv);
	}
	bfs_options_destroy(&o2);
}

int bfs_fuzz_options(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1), *argv[MAX_ARGS + 2];
	int argc = 0, fargc = 0;
	char **fargv = NULL;
	struct bfs_options o;

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	argv[argc++] = "batchfs";
	for (size_t i = 0; i <= size && argc <= MAX_ARGS;) {
		size_t len = strlen(copy + i);
		argv[argc++] = copy + i;
		i += len + 1;
	}
	argv[argc] = NULL;
	if (bfs_options_parse(&o, argc, argv, &fargc, &fargv) == 0) {
		FUZZ_ASSERT(fargc >= 1 && fargv && fargv[0] && strcmp(fargv[0], "batchfs") == 0);
		if (!o.help && !o.version) {
			char *desc = bfs_options_describe(&o);

			FUZZ_ASSERT(o.source && o.mountpoint && o.index_dir);
			FUZZ_ASSERT(o.batch_size > 0 && o.world > 0 && o.rank < o.world);
			/* prefetch=0 turns prefetching off; the default is resolved by now */
			FUZZ_ASSERT(o.prefetch != BFS_PREFETCH_DEFAULT && o.threads > 0);
			FUZZ_ASSERT(desc);
			check_roundtrip(&o, desc);
			free(desc);
		}
		bfs_options_free_argv(fargc, fargv);
	}
	bfs_options_destroy(&o);
	free(copy);
	return 0;
}

#ifdef BFS_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return bfs_fuzz_options(data, size);
}
#endif
