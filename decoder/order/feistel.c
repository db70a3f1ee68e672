/* SPDX-License-Identifier: Apache-2.0 */
/* feistel.c — keyed Feistel permutation with cycle walking (see feistel.h). */
#include "feistel.h"

#include <string.h>

#define GOLDEN 0x9E3779B97F4A7C15ull
#define ROUNDS 6

uint64_t bfs_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void bfs_feistel_init(struct bfs_feistel *p, uint64_t n, uint64_t seed, uint64_t epoch, int shuffle)
{
	unsigned bits = 0;
	uint64_t base;

	p->n = n;
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

static uint64_t encrypt(const struct bfs_feistel *p, uint64_t x)
{
	uint64_t l = x >> p->half, r = x & p->mask;

	for (unsigned i = 0; i < ROUNDS; i++) {
		uint64_t t = l ^ (bfs_mix64(r ^ p->key[i]) & p->mask);
		l = r;
		r = t;
	}
	return (l << p->half) | r;
}

/* encrypt() over v[0..n), n a multiple of 8. */
static void encrypt_scalar(const struct bfs_feistel *p, uint64_t *v, size_t n)
{
	for (size_t k = 0; k < n; k++)
		v[k] = encrypt(p, v[k]);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang_analyzer__)
#define PERM_VECTOR 1
typedef uint64_t v8u __attribute__((vector_size(64)));

/* The same rounds on 8 positions per instruction (AVX-512DQ has a 64-bit
 * multiply); used only where the CPU has it. A round is two dependent
 * multiplies (~15 cycles each), so four vectors go through the rounds side
 * by side: their chains overlap instead of waiting on each other. */
#define LANES 8
#define WAYS 4
__attribute__((target("avx512f,avx512dq"), always_inline)) static inline void
rounds_avx512(const struct bfs_feistel *p, uint64_t *v, size_t ways)
{
	const uint64_t half = p->half, mask = p->mask;
	v8u l[WAYS], r[WAYS];

	for (size_t u = 0; u < ways; u++) {
		v8u x;
		memcpy(&x, v + u * LANES, sizeof(x));
		l[u] = x >> half;
		r[u] = x & mask;
	}
	for (unsigned i = 0; i < ROUNDS; i++) {
		for (size_t u = 0; u < ways; u++) {
			v8u z = r[u] ^ p->key[i], t;
			z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
			z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
			z ^= z >> 31;
			t = l[u] ^ (z & mask);
			l[u] = r[u];
			r[u] = t;
		}
	}
	for (size_t u = 0; u < ways; u++) {
		v8u x = (l[u] << half) | r[u];
		memcpy(v + u * LANES, &x, sizeof(x));
	}
}

__attribute__((target("avx512f,avx512dq"))) static void encrypt_avx512(const struct bfs_feistel *p,
								       uint64_t *v, size_t n)
{
	size_t k = 0;

	for (; k + WAYS * LANES <= n; k += WAYS * LANES)
		rounds_avx512(p, v + k, WAYS);
	for (; k < n; k += LANES)
		rounds_avx512(p, v + k, 1);
}
#endif

/* Many positions at once: each pass encrypts every position still out of
 * range (8 at a time where the CPU can), then keeps the ones still out of
 * range, without branches. Same results as bfs_feistel_apply. */
void bfs_feistel_apply_many(const struct bfs_feistel *p, const uint64_t *pos, size_t n,
			    uint64_t *out, bool vector)
{
	enum { BLOCK = 256 };
	uint64_t val[BLOCK];
	uint32_t idx[BLOCK];
	void (*enc)(const struct bfs_feistel *, uint64_t *, size_t) = encrypt_scalar;

#ifdef PERM_VECTOR
	if (vector && __builtin_cpu_supports("avx512dq"))
		enc = encrypt_avx512;
#else
	(void)vector;
#endif
	if (p->identity) {
		for (size_t i = 0; i < n; i++)
			out[i] = pos[i];
		return;
	}
	for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
		size_t m = n - i0 < BLOCK ? n - i0 : BLOCK, left = m;
		uint64_t *y = out + i0;

		for (size_t k = 0; k < m; k++) {
			val[k] = pos[i0 + k];
			idx[k] = (uint32_t)k;
		}
		while (left) {
			size_t next = 0, padded = (left + 7) & ~(size_t)7;
			for (size_t k = left; k < padded; k++)
				val[k] = 0; /* lanes past the end: encrypted, never kept */
			enc(p, val, padded);
			for (size_t k = 0; k < left; k++) {
				/* the last value written for a position is its
				 * first one in range */
				y[idx[k]] = val[k];
				val[next] = val[k];
				idx[next] = idx[k];
				next += val[k] >= p->n;
			}
			left = next;
		}
	}
}

uint64_t bfs_feistel_apply(const struct bfs_feistel *p, uint64_t pos)
{
	uint64_t y;

	if (p->identity)
		return pos;
	y = encrypt(p, pos);
	while (y >= p->n)
		y = encrypt(p, y);
	return y;
}
