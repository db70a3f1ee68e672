/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cachehdr.h — the header every batchfs cache file starts with (a shard's
 * index, an index pack, a counts file): how it is begun, sealed and checked.
 *
 * A format's header is a struct of its own that starts with struct
 * bfs_cachehdr (an 8-byte magic: a 6-byte family such as "BFSIDX" and a
 * 2-byte version; then the header's size in bytes) and ends with a
 * uint32_t: the CRC-32C of every byte of the header before it. The fields
 * between are the format's. Native little-endian, as the files are.
 *
 * Does not: read or write files, or check the format's own fields.
 * Thread-safe; no allocation.
 */
#ifndef BFS_CACHEHDR_H
#define BFS_CACHEHDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BFS_CACHEHDR_FAMILY 6 /* bytes of the magic naming the format; the rest is its version */

struct bfs_cachehdr {
	char magic[8];
	uint32_t hdr_bytes; /* the format's header size */
};

/* Begin a header of `size` bytes at h: zeroed, then magic (8 bytes) and
 * hdr_bytes = size. */
void bfs_cachehdr_init(void *h, size_t size, const char *magic);

/* Seal the header of `size` bytes at h once every other field is set: the
 * CRC-32C of its first size - 4 bytes into its last 4. */
void bfs_cachehdr_seal(void *h, size_t size);

/* The checks every cache file's header takes, in this order, for a file of
 * file_size bytes whose first min(file_size, size) bytes h holds (the rest
 * zero): the family of `magic` ("not a batchfs <what>"), its version ("old
 * <format> format XXX (this batchfs writes <magic>)"), the file's size
 * ("truncated (N bytes, the header alone is <size>)"), the CRC ("corrupt
 * header (checksum mismatch)"). true when all hold; false with the reason
 * in why (whycap bytes; why may be NULL when whycap is 0). hdr_bytes and
 * the format's fields are the caller's to check. */
bool bfs_cachehdr_check(const void *h, size_t size, uint64_t file_size, const char *magic,
			const char *what, const char *format, char *why, size_t whycap);

#endif
