/* SPDX-License-Identifier: Apache-2.0 */
/* cachehdr.c — see cachehdr.h. */
#include "cachehdr.h"

#include "crc32c.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void bfs_cachehdr_init(void *h, size_t size, const char *magic)
{
	struct bfs_cachehdr head = { .hdr_bytes = (uint32_t)size };

	memcpy(head.magic, magic, sizeof(head.magic));
	memset(h, 0, size);
	memcpy(h, &head, sizeof(head));
}

static uint32_t crc_of(const void *h, size_t size)
{
	return bfs_crc32c(0, h, size - sizeof(uint32_t));
}

void bfs_cachehdr_seal(void *h, size_t size)
{
	uint32_t crc = crc_of(h, size);

	memcpy((uint8_t *)h + size - sizeof(crc), &crc, sizeof(crc));
}

bool bfs_cachehdr_check(const void *h, size_t size, uint64_t file_size, const char *magic,
			const char *what, const char *format, char *why, size_t whycap)
{
	struct bfs_cachehdr head;
	uint32_t crc;

	memcpy(&head, h, sizeof(head));
	if (file_size < 8 || memcmp(head.magic, magic, BFS_CACHEHDR_FAMILY) != 0) {
		snprintf(why, whycap, "not a batchfs %s", what);
		return false;
	}
	if (memcmp(head.magic, magic, sizeof(head.magic)) != 0) {
		snprintf(why, whycap, "old %s format %.8s (this batchfs writes %s)", format,
			 head.magic, magic);
		return false;
	}
	if (file_size < size) {
		snprintf(why, whycap, "truncated (%" PRIu64 " bytes, the header alone is %zu)",
			 file_size, size);
		return false;
	}
	memcpy(&crc, (const uint8_t *)h + size - sizeof(crc), sizeof(crc));
	if (crc != crc_of(h, size)) {
		snprintf(why, whycap, "corrupt header (checksum mismatch)");
		return false;
	}
	return true;
}
