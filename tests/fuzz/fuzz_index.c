/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_index.c — fuzz target for index.c: the bytes are an index cache file
 * (untrusted: anyone who can write the index directory writes them). They
 * are loaded twice: as they are, and with the two CRCs recomputed and the
 * key taken from the header, so that mutations reach the checks behind the
 * CRCs (counts, directory entries, seek points); the fixed-up bytes once
 * more with the key's compression AUTO (a re-mount takes it from the file:
 * it must be one of none, gzip, zlib). A loaded index must answer
 * every lookup inside its own bytes (ASan/UBSan builds replay the corpus)
 * with lengths never above its max_len.
 *
 * Offsets used for the fix-up (index.c, struct bfs_index_hdr): comp at 12,
 * file size at 16, mtime at 24, pathlen at 80, body CRC at 88, header CRC at
 * 124, header 128 bytes, the path right after it.
 */
#include "crc32c.h"
#include "fuzz_index_check.h"
#include "index.h"

#include <stdlib.h>
#include <string.h>

int bfs_fuzz_index(const uint8_t *data, size_t size);

static void exercise(const uint8_t *p, size_t size, const struct bfs_index_key *k)
{
	struct bfs_index *ix = NULL;
	char why[256];

	if (bfs_index_from_bytes(&ix, p, size, k, why, sizeof(why)) == BFS_INDEX_LOADED)
		fuzz_check_index(ix, k);
}

int bfs_fuzz_index(const uint8_t *data, size_t size)
{
	struct bfs_index_key k = { "/fuzz/shard", 1, 0, 0 };
	char path[4097];
	uint8_t *copy;
	uint32_t pathlen, crc;

	exercise(data, size, &k);
	if (size < 128)
		return 0;
	copy = malloc(size);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	memcpy(&k.comp, copy + 12, 4);
	memcpy(&k.file_size, copy + 16, 8);
	memcpy(&k.mtime_ns, copy + 24, 8);
	memcpy(&pathlen, copy + 80, 4);
	if (pathlen >= sizeof(path) || pathlen > size - 128)
		pathlen = 0;
	memcpy(path, copy + 128, pathlen);
	path[pathlen] = '\0';
	if (strlen(path) != pathlen) { /* a NUL inside: make it the path's end */
		pathlen = (uint32_t)strlen(path);
		memcpy(copy + 80, &pathlen, 4);
	}
	k.path = path;
	crc = bfs_crc32c(0, copy + 128, size - 128);
	memcpy(copy + 88, &crc, 4);
	crc = bfs_crc32c(0, copy, 124);
	memcpy(copy + 124, &crc, 4);
	exercise(copy, size, &k);
	k.comp = 0;
	exercise(copy, size, &k);
	free(copy);
	return 0;
}

#ifdef BFS_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return bfs_fuzz_index(data, size);
}
#endif
