/*
 * fuzz_ixpack.c — fuzz target for ixpack.c: the bytes are an index pack
 * (untrusted: anyone who can write the index directory writes them). They
 * are loaded twice: as they are, and with the pack's file size, table CRC
 * and header CRC fixed up (the entry count cut to what the bytes hold), and
 * every entry's two CRCs fixed up too, so that mutations reach the checks
 * behind the CRCs: the table's bounds and order, and each entry's own
 * checks (index.c). Every entry is then asked for under the key its own
 * bytes claim, and under that key with compression AUTO; a loaded index must
 * answer every lookup inside its own bytes with lengths never above its
 * max_len (ASan/UBSan builds replay the corpus).
 *
 * Offsets used for the fix-up (ixpack.c, struct bfs_ixpack_hdr): entry
 * count at 16, file size at 24, table CRC at 32, header CRC at 60, header
 * 64 bytes; table rows of 24 bytes (hash, offset, length). An entry
 * (index.c, struct bfs_index_hdr): pathlen at 80, body CRC at 88, header
 * CRC at 124, header 128 bytes.
 */
#include "crc32c.h"
#include "fuzz_index_check.h"
#include "index.h"
#include "ixpack.h"

#include <stdlib.h>
#include <string.h>

int bfs_fuzz_ixpack(const uint8_t *data, size_t size);

static void exercise(const uint8_t *p, size_t size)
{
	struct bfs_ixpack *pk = NULL;
	struct bfs_index_key k = { "/fuzz/none", 1, 0, 0 };
	struct bfs_index *ix = NULL;
	char why[256], path[4097];
	bool had;

	if (bfs_ixpack_from_bytes(&pk, p, size, why, sizeof(why)) != BFS_INDEX_LOADED)
		return;
	if (bfs_ixpack_get(pk, &k, &ix, &had, why, sizeof(why)) == BFS_INDEX_LOADED)
		fuzz_check_index(ix, &k);
	for (size_t i = 0; i < bfs_ixpack_count(pk); i++) {
		const uint8_t *e;
		uint64_t h;
		size_t len;

		bfs_ixpack_entry(pk, i, &h, &e, &len);
		if (!bfs_index_image_key(e, len, &k, path, sizeof(path)))
			continue;
		if (bfs_ixpack_get(pk, &k, &ix, &had, why, sizeof(why)) == BFS_INDEX_LOADED)
			fuzz_check_index(ix, &k);
		k.comp = 0;
		if (bfs_ixpack_get(pk, &k, &ix, &had, why, sizeof(why)) == BFS_INDEX_LOADED)
			fuzz_check_index(ix, &k);
	}
	bfs_ixpack_free(pk);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

int bfs_fuzz_ixpack(const uint8_t *data, size_t size)
{
	uint8_t *copy;
	uint64_t n;

	exercise(data, size);
	if (size < 64)
		return 0;
	copy = malloc(size);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	memcpy(&n, copy + 16, 8);
	if (n > (size - 64) / 24) {
		n = (size - 64) / 24;
		put64(copy + 16, n);
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t off, len;
		uint32_t pathlen;

		memcpy(&off, copy + 64 + 24 * i + 8, 8);
		memcpy(&len, copy + 64 + 24 * i + 16, 8);
		if (off > size || len > size - off || len < 128 || off < 64 + 24 * n)
			continue;
		memcpy(&pathlen, copy + off + 80, 4);
		/* the path's hash in the table, when the path is in the entry */
		if (pathlen <= len - 128 && pathlen < 4096) {
			char path[4096];

			memcpy(path, copy + off + 128, pathlen);
			path[pathlen] = '\0';
			put64(copy + 64 + 24 * i, bfs_ixpack_hash(path));
		}
		put32(copy + off + 88, bfs_crc32c(0, copy + off + 128, (size_t)(len - 128)));
		put32(copy + off + 124, bfs_crc32c(0, copy + off, 124));
	}
	put64(copy + 24, size);
	put32(copy + 32, bfs_crc32c(0, copy + 64, (size_t)(24 * n)));
	put32(copy + 60, bfs_crc32c(0, copy, 60));
	exercise(copy, size);
	free(copy);
	return 0;
}

#ifdef BFS_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return bfs_fuzz_ixpack(data, size);
}
#endif
