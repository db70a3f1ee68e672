/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_index_check.h — what the index fuzz targets (fuzz_index,
 * fuzz_ixpack) require of any index they managed to load: a known
 * compression (the key's when it names one), every lookup inside the index's
 * own bytes with lengths never above its max_len, seek points inside the
 * file. Aborts otherwise; frees the index.
 */
#ifndef BFS_FUZZ_INDEX_CHECK_H
#define BFS_FUZZ_INDEX_CHECK_H

#include "index.h"

#include <stdlib.h>

static void fuzz_check_index(struct bfs_index *ix, const struct bfs_index_key *k)
{
	uint64_t n = ix->n, step = n > 65536 ? n / 65536 : 1;

	if (ix->comp < 1 || ix->comp > 3 || (k->comp && ix->comp != k->comp))
		abort();
	for (uint64_t i = 0; i < n; i += step) {
		if (bfs_index_len(ix, i) > ix->max_len)
			abort();
		(void)bfs_index_offset(ix, i + 1);
	}
	(void)bfs_index_offset(ix, n);
	for (size_t i = 0; i < ix->npts; i++)
		if (ix->pts[i].bits > 7 || ix->pts[i].in_off > k->file_size)
			abort();
	bfs_index_free(ix);
}

#endif
