/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crc32c.c — CRC-32C (Castagnoli, reflected polynomial 0x82f63b78).
 *
 * Two implementations with identical results:
 *  - portable slicing-by-8 over tables built once (pthread_once);
 *  - x86-64 SSE4.2 `crc32` instruction, used when the CPU has it. Long
 *    buffers are split into three interleaved streams (the instruction has a
 *    latency of 3 cycles and a throughput of 1), whose CRCs are combined with
 *    precomputed "shift by N zero bytes" operators.
 *
 * The public functions take and return the finished CRC (pre- and
 * post-inverted), so bfs_crc32c(bfs_crc32c(0, a, n), b, m) is the CRC of a||b.
 * Does not: allocate, or know about TFRecord beyond the mask in crc32c.h.
 */
#include "crc32c.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BFS_CRC_HAVE_SSE42 1
#include <nmmintrin.h>
#endif

#define POLY 0x82f63b78u

/* Bytes per stream in the interleaved hardware loops. */
#define LONG_BLOCK 8192
#define SHORT_BLOCK 256

static uint32_t tab8[8][256];
/* Multiply a raw CRC register by x^(8*N) mod P, N = LONG_BLOCK / SHORT_BLOCK. */
static uint32_t zeros_long[4][256];
static uint32_t zeros_short[4][256];
static int hw_ok;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static atomic_int ready; /* set last by crc_init */

/* Byte-at-a-time update of a raw (not inverted) register. */
static uint32_t crc_bytes_raw(uint32_t c, const uint8_t *p, size_t n)
{
	while (n--)
		c = tab8[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

/* Build the table form of the linear operator "feed `n` zero bytes". */
static void build_zeros_table(uint32_t t[4][256], size_t n)
{
	uint32_t basis[32];

	for (int b = 0; b < 32; b++) {
		uint32_t c = (uint32_t)1 << b;
		for (size_t k = 0; k < n; k++)
			c = tab8[0][c & 0xff] ^ (c >> 8);
		basis[b] = c;
	}
	for (int k = 0; k < 4; k++) {
		for (uint32_t v = 0; v < 256; v++) {
			uint32_t r = 0;
			for (int b = 0; b < 8; b++)
				if (v & (1u << b))
					r ^= basis[8 * k + b];
			t[k][v] = r;
		}
	}
}

static inline uint32_t apply_zeros(uint32_t t[4][256], uint32_t c)
{
	return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
		tab8[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = tab8[0][i];
		for (int k = 1; k < 8; k++) {
			c = tab8[0][c & 0xff] ^ (c >> 8);
			tab8[k][i] = c;
		}
	}
	build_zeros_table(zeros_long, LONG_BLOCK);
	build_zeros_table(zeros_short, SHORT_BLOCK);
#ifdef BFS_CRC_HAVE_SSE42
	__builtin_cpu_init();
	hw_ok = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
	atomic_store_explicit(&ready, 1, memory_order_release);
}

static inline uint64_t load64le(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

uint32_t bfs_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t c = ~crc;

	pthread_once(&init_once, crc_init);
	while (len && ((uintptr_t)p & 7)) {
		c = tab8[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		len--;
	}
	while (len >= 8) {
		uint64_t v = load64le(p) ^ c;
		c = tab8[7][v & 0xff] ^ tab8[6][(v >> 8) & 0xff] ^ tab8[5][(v >> 16) & 0xff] ^
		    tab8[4][(v >> 24) & 0xff] ^ tab8[3][(v >> 32) & 0xff] ^
		    tab8[2][(v >> 40) & 0xff] ^ tab8[1][(v >> 48) & 0xff] ^ tab8[0][v >> 56];
		p += 8;
		len -= 8;
	}
	c = crc_bytes_raw(c, p, len);
	return ~c;
}

#ifdef BFS_CRC_HAVE_SSE42
/* Three streams of `blk` bytes each, combined: c(A||B||C) from c(A), c(B), c(C). */
__attribute__((target("sse4.2"))) static uint64_t hw_3way(uint64_t c0, const uint8_t **pp,
							  size_t blk, uint32_t zt[4][256])
{
	const uint8_t *p = *pp;
	const uint8_t *end = p + blk;
	uint64_t c1 = 0, c2 = 0;

	do {
		c0 = _mm_crc32_u64(c0, load64le(p));
		c1 = _mm_crc32_u64(c1, load64le(p + blk));
		c2 = _mm_crc32_u64(c2, load64le(p + 2 * blk));
		p += 8;
	} while (p < end);
	c0 = apply_zeros(zt, (uint32_t)c0) ^ c1;
	c0 = apply_zeros(zt, (uint32_t)c0) ^ c2;
	*pp = p + 2 * blk;
	return c0;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *buf,
							    size_t len)
{
	const uint8_t *p = buf;
	uint64_t c = (uint32_t)~crc;

	/* no alignment prologue: x86 loads 8 unaligned bytes at full speed,
	 * and a record's bytes start anywhere (a 7-byte prologue is 7
	 * dependent 3-cycle steps on every short record) */
	while (len >= 3 * LONG_BLOCK) {
		c = hw_3way(c, &p, LONG_BLOCK, zeros_long);
		len -= 3 * LONG_BLOCK;
	}
	while (len >= 3 * SHORT_BLOCK) {
		c = hw_3way(c, &p, SHORT_BLOCK, zeros_short);
		len -= 3 * SHORT_BLOCK;
	}
	while (len >= 8) {
		c = _mm_crc32_u64(c, load64le(p));
		p += 8;
		len -= 8;
	}
	if (len >= 4) {
		uint32_t w;
		memcpy(&w, p, 4);
		c = _mm_crc32_u32((uint32_t)c, w); /* x86: little-endian */
		p += 4;
		len -= 4;
	}
	if (len >= 2) {
		c = _mm_crc32_u16((uint32_t)c, (uint16_t)(p[0] | p[1] << 8));
		p += 2;
		len -= 2;
	}
	if (len)
		c = _mm_crc32_u8((uint32_t)c, *p);
	return ~(uint32_t)c;
}
#endif

uint32_t bfs_crc32c(uint32_t crc, const void *buf, size_t len)
{
	/* one load on the hot path (a record's CRCs are two calls) rather than
	 * a call to pthread_once through the PLT */
	if (!atomic_load_explicit(&ready, memory_order_acquire))
		pthread_once(&init_once, crc_init);
#ifdef BFS_CRC_HAVE_SSE42
	if (hw_ok)
		return crc32c_hw(crc, buf, len);
#endif
	return bfs_crc32c_sw(crc, buf, len);
}
