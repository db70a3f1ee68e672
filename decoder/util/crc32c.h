/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crc32c.h — CRC-32C (Castagnoli) and TFRecord's masking.
 *
 * Uses the SSE4.2 crc32 instruction when the CPU has it (checked once at
 * run time), a portable slicing table otherwise. Both give identical results;
 * bfs_crc32c_sw() exposes the portable one so tests can compare them.
 * Thread-safe; no allocation.
 */
#ifndef BFS_CRC32C_H
#define BFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of buf[0..len), continuing from crc (0 to start). */
uint32_t bfs_crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t bfs_crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* TFRecord masking: ((c >> 15) | (c << 17)) + 0xa282ead8 */
static inline uint32_t bfs_crc32c_mask(uint32_t c)
{
	return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static inline uint32_t bfs_crc32c_unmask(uint32_t m)
{
	uint32_t r = m - 0xa282ead8u;
	return (r >> 17) | (r << 15);
}

#endif
