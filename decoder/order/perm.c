/* SPDX-License-Identifier: Apache-2.0 */
/*
 * perm.c — the epoch order (see perm.h): the block order when one is
 * attached, else the Feistel bijection (feistel.c), which is the identity
 * under shuffle=none.
 */
#include "perm.h"

#include "blockshuf.h"
#include "mix.h"

void bfs_perm_init(struct bfs_perm *p, uint64_t n, uint64_t seed, uint64_t epoch, int shuffle)
{
	bfs_feistel_init(&p->f, n, seed, epoch, shuffle);
	p->bo = NULL;
	p->mix = NULL;
	p->epoch = epoch;
}

void bfs_perm_init_mix(struct bfs_perm *p, const struct bfs_mix *mix, uint64_t epoch)
{
	bfs_feistel_init(&p->f, 0, 0, epoch, 0);
	p->bo = NULL;
	p->mix = mix;
	p->epoch = epoch;
}

void bfs_perm_apply_many_how(const struct bfs_perm *p, const uint64_t *pos, size_t n, uint64_t *out,
			     bool vector)
{
	if (p->mix)
		bfs_mix_records(p->mix, p->epoch, pos, n, out);
	else if (p->bo)
		bfs_block_order_apply_many(p->bo, pos, n, out);
	else
		bfs_feistel_apply_many(&p->f, pos, n, out, vector);
}

void bfs_perm_apply_many(const struct bfs_perm *p, const uint64_t *pos, size_t n, uint64_t *out)
{
	bfs_perm_apply_many_how(p, pos, n, out, true);
}

void bfs_perm_release(struct bfs_perm *p)
{
	bfs_block_order_put(p->bo);
	p->bo = NULL;
}
