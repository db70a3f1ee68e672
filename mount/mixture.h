/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mixture.h — SOURCE a mixture file (docs/contract.md, Mixtures): each
 * entry opened as a plain dataset with its own options, their schemas
 * merged, their records numbered as one union, and the order of the
 * mixture (mix.h) for the batcher; the lines README.txt and schema.json
 * add about it.
 *
 * Used by main.c before anything is mounted: every error is one line on
 * stderr naming the entry, and the mount fails with exit status 1.
 * Single-threaded.
 */
#ifndef BFS_MIXTURE_H
#define BFS_MIXTURE_H

#include "dataset.h"
#include "mix.h"
#include "options.h"
#include "schema.h"

#include <stdbool.h>

struct bfs_mount_mix {
	struct bfs_mixfile *file;
	size_t n;
	struct bfs_dataset **members; /* [n] each source, open */
	struct bfs_dataset *ds; /* their union: what the batcher reads */
	struct bfs_schema *schema; /* merged (inferred), or NULL with schema= */
	struct bfs_mix *mix;
	struct bfs_mix_facts facts; /* its arrays are the ones below */
	char **sources; /* [n] as opened (resolved against the file's folder) */
	const char **names;
	uint64_t *records;
	uint64_t *ratio, *period; /* [nseg * n], [nseg]: each period as drawn */
	bool *approximated; /* [nseg] */
};

/* Whether SOURCE is a mixture file: a regular file holding a JSON object
 * with a top-level key "mixture". */
bool bfs_mount_mix_is(const char *source);

/* Open the mixture file at path: its sources with the mount's dataset
 * options (dopt; each source's own options replace compression, split and
 * follow_symlinks), features= applied to each inferred schema before they
 * are merged (user: schema= given, nothing inferred). 0, or 1 after one
 * line on stderr. */
int bfs_mount_mix_open(struct bfs_mount_mix **out, const char *path, const struct bfs_options *o,
		       const struct bfs_dataset_opts *dopt, bool user);
void bfs_mount_mix_close(struct bfs_mount_mix *mm); /* accepts NULL */

/* Add the provenance features _source and _record to the schema. 0, or 1
 * after one line (a source's feature of that name). */
int bfs_mount_mix_add_provenance(struct bfs_schema *s);

/* README.txt's section on the mixture (malloc'd; NULL when out of
 * memory). schema.json's facts are mm->facts. */
char *bfs_mount_mix_readme(const struct bfs_mount_mix *mm, const char *mnt);

#endif
