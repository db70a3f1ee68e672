/* perm.c — keyed Feistel permutation with cycle walking (see perm.h). */
#include "perm.h"

#include "blockshuf.h"

#define GOLDEN 0x9E3779B97F4A7C15ull
#define ROUNDS 6

uint64_t bfs_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void bfs_perm_init(struct bfs_perm *p, uint64_t n, uint64_t seed, uint64_t epoch, int shuffle)
{
	unsigned bits = 0;
	uint64_t base;

	p->n = n;
	p->bo = NULL;
	p->identity = !shuffle || n <= 1;
	if (p->identity) {
		p->half = 0;
		p->mask = 0;
		return;
	}
	for (uint64_t m = n - 1; m; m >>= 1)
		bits++;
	if (bits < 2)
		bits = 2;
	if (bits & 1)
		bits++;
	p->half = bits / 2;
	p->mask = (p->half >= 64) ? ~0ull : ((1ull << p->half) - 1);
	base = bfs_mix64(seed + GOLDEN * (epoch + 1));
	for (unsigned r = 0; r < ROUNDS; r++)
		p->key[r] = bfs_mix64(base + GOLDEN * (r + 1));
}

static uint64_t encrypt(const struct bfs_perm *p, uint64_t x)
{
	uint64_t l = x >> p->half, r = x & p->mask;

	for (unsigned i = 0; i < ROUNDS; i++) {
		uint64_t t = l ^ (bfs_mix64(r ^ p->key[i]) & p->mask);
		l = r;
		r = t;
	}
	return (l << p->half) | r;
}

/* Many positions at once: each pass encrypts every position still out of
 * range, so the passes' iterations are independent (the CPU overlaps their
 * multiply chains, where one position's cycle walk waits on itself and
 * mispredicts its loop), and the list of positions still walking is
 * compacted without branches. Same results as bfs_perm_apply. */
void bfs_perm_apply_many(const struct bfs_perm *p, const uint64_t *pos, size_t n, uint64_t *out)
{
	enum { BLOCK = 64 };
	uint32_t todo[BLOCK];

	if (p->bo) {
		bfs_block_order_apply_many(p->bo, pos, n, out);
		return;
	}
	if (p->identity) {
		for (size_t i = 0; i < n; i++)
			out[i] = pos[i];
		return;
	}
	for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
		size_t m = n - i0 < BLOCK ? n - i0 : BLOCK, left = m;
		uint64_t *y = out + i0;

		for (size_t k = 0; k < m; k++) {
			y[k] = pos[i0 + k];
			todo[k] = (uint32_t)k;
		}
		while (left) {
			size_t next = 0;
			for (size_t k = 0; k < left; k++)
				y[todo[k]] = encrypt(p, y[todo[k]]);
			for (size_t k = 0; k < left; k++) {
				todo[next] = todo[k];
				next += y[todo[k]] >= p->n;
			}
			left = next;
		}
	}
}

uint64_t bfs_perm_apply(const struct bfs_perm *p, uint64_t pos)
{
	uint64_t y;

	if (p->bo)
		return bfs_block_order_apply(p->bo, pos);
	if (p->identity)
		return pos;
	y = encrypt(p, pos);
	while (y >= p->n)
		y = encrypt(p, y);
	return y;
}

void bfs_perm_release(struct bfs_perm *p)
{
	bfs_block_order_put(p->bo);
	p->bo = NULL;
}
