/* SPDX-License-Identifier: Apache-2.0 */
/*
 * schema_check.c — the ragged counts of a record's feature: the values and
 * bytes its row will hold (the batch's fill checks a record against the
 * schema as it writes it: batch_fill.c).
 */
#include "schema_impl.h"

void bfs_spec_ragged_counts(const struct bfs_feature_spec *f, const struct bfs_example *ex,
			    uint64_t *nvalues, uint64_t *nbytes)
{
	const struct bfs_values *v = f->is_list ? NULL : bfs_example_find(ex, f->name);

	*nvalues = 0;
	*nbytes = 0;
	if (!v || v->kind != f->kind)
		return;
	*nvalues = v->count;
	if (v->kind == BFS_KIND_BYTES)
		for (size_t i = 0; i < v->count; i++)
			*nbytes += v->b[i].len;
}
