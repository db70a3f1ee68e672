/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dataset_union.c — several open datasets seen as one (dataset.h,
 * bfs_dataset_union): a mixture's sources share one record numbering,
 * one batcher and one I/O stage, and every read goes to the member's own
 * shard objects (their indexes, shadow copies and descriptors).
 */
#include "dataset_impl.h"

#include <stdlib.h>
#include <string.h>

void bfs_dataset_union_free(struct bfs_dataset *ds)
{
	for (size_t i = 0; ds->cut && i < ds->nshards; i++)
		free(ds->cut[i]);
	free(ds->cut);
	free(ds->shards);
	free(ds->first);
	free(ds->scnt); /* its members' */
	free(ds);
}

int bfs_dataset_union(struct bfs_dataset **out, struct bfs_dataset *const *members, size_t n)
{
	struct bfs_dataset *u = calloc(1, sizeof(*u));
	size_t total = 0, k = 0;

	if (!u)
		return -ENOMEM;
	u->borrowed = true;
	u->index_reused = u->schema_reused = true;
	for (size_t m = 0; m < n; m++) {
		const struct bfs_dataset *d = members[m];

		total += d->nshards;
		if (d->objs && u->objs) {
			bfs_dataset_union_free(u);
			return bfs_err_set(
				-EINVAL,
				"a mixture may read one bucket source at most (source %zu "
				"is the second)",
				m);
		}
		if (d->objs)
			u->objs = d->objs;
		u->index_reused &= d->index_reused;
		u->schema_reused &= d->schema_reused;
		u->bad_records += d->bad_records;
		if (d->max_len > u->max_len)
			u->max_len = d->max_len;
	}
	u->shards = calloc(total ? total : 1,
			   sizeof(*u->shards)); /* NOLINT(bugprone-sizeof-expression) */
	u->first = calloc(total + 1, sizeof(*u->first));
	u->cut = calloc(total ? total : 1, sizeof(*u->cut));
	if (!u->shards || !u->first || !u->cut) {
		bfs_dataset_union_free(u);
		return -ENOMEM;
	}
	u->nshards = total;
	for (size_t m = 0; m < n; m++) {
		const struct bfs_dataset *d = members[m];

		if (d->scnt && !u->scnt &&
		    !(u->scnt = calloc(total ? total : 1, sizeof(struct bfs_scan_counts *)))) {
			bfs_dataset_union_free(u);
			return -ENOMEM;
		}
		for (size_t i = 0; i < d->nshards; i++, k++) {
			u->shards[k] = d->shards[i];
			if (d->scnt)
				u->scnt[k] = d->scnt[i];
			u->first[k] = u->nrecords + d->first[i];
			if (d->cut && d->cut[i] && !(u->cut[k] = strdup(d->cut[i]))) {
				bfs_dataset_union_free(u);
				return -ENOMEM;
			}
		}
		u->nrecords += d->nrecords;
	}
	u->first[total] = u->nrecords;
	*out = u;
	return 0;
}
