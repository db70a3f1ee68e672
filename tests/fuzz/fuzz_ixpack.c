/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_ixpack.c — fuzz target for ixpack.c: the bytes are an index pack
 * (untrusted: anyone who can write the index directory writes them). They
 * are loaded from a file (a memfd), as a mount loads a pack, twice: as
 * they are, and with the pack's file size, table CRC and header CRC fixed
 * up (the entry count cut to what the bytes hold), and
 * every entry's two CRCs fixed up too, so that mutations reach the checks
 * behind the CRCs: the table's bounds and order, and each entry's own
 * checks (index.c). Every entry is then asked for under the key its own
 * bytes claim, and under that key with compression AUTO; a loaded index must
 * answer every lookup inside its own bytes with lengths never above its
 * max_len (ASan/UBSan builds replay the corpus).
 *
 * The same container holds the ragged counts of small shards (cntcache.c):
 * an entry that starts like a counts file is fixed up as one, read back the
 * way cntcache.c looks it up (bfs_ixpack_find, then every check of a counts
 * file under the key its bytes claim, checks only and into columns), and a
 * LOADED one must hold exactly its column bytes.
 *
 * Offsets used for the fix-up (ixpack.c, struct bfs_ixpack_hdr): entry
 * count at 16, file size at 24, table CRC at 32, header CRC at 60, header
 * 64 bytes; table rows of 24 bytes (hash, offset, length). An index entry
 * (index.c, struct bfs_index_hdr): pathlen at 80, body CRC at 88, header
 * CRC at 124, header 128 bytes. A counts entry (counts.c, struct
 * bfs_counts_hdr): pathlen at 44, body CRC at 52, header CRC at 60, header
 * 64 bytes.
 */
#include "counts.h"
#include "crc32c.h"
#include "fuzz_index_check.h"
#include "fuzz_memfd.h"
#include "index.h"
#include "ixpack.h"

#include <stdlib.h>
#include <string.h>

int bfs_fuzz_ixpack(const uint8_t *data, size_t size);

/* Entry e's bytes as a counts file, looked up as cntcache.c does. */
static void exercise_counts(const struct bfs_ixpack *pk, const uint8_t *e, size_t len)
{
	struct bfs_counts_key k;
	char path[4097], why[256];

	if (!bfs_counts_image_key(e, len, &k, path, sizeof(path)))
		return;
	for (size_t i = bfs_ixpack_find(pk, bfs_ixpack_hash(path)); i < bfs_ixpack_count(pk); i++) {
		const uint8_t *p;
		uint64_t h;
		size_t n, col;
		uint8_t *buf;
		uint32_t *cols[8];

		bfs_ixpack_entry(pk, i, &h, &p, &n);
		if (h != bfs_ixpack_hash(path))
			break;
		if (bfs_counts_from_bytes(p, n, &k, NULL, why, sizeof(why)) != BFS_COUNTS_LOADED)
			continue;
		/* sound: the columns fit in the entry, and read back as its bytes */
		if (k.nslots && k.nrecords > n / 4 / k.nslots)
			abort();
		if (k.nslots > 8)
			continue;
		col = (size_t)k.nrecords * 4;
		buf = malloc(col * k.nslots + 1);
		if (!buf)
			return;
		for (uint32_t s = 0; s < k.nslots; s++)
			cols[s] = (uint32_t *)(void *)(buf + col * s);
		if (bfs_counts_from_bytes(p, n, &k, cols, why, sizeof(why)) != BFS_COUNTS_LOADED ||
		    bfs_counts_file_bytes(&k) != n ||
		    (col && memcmp(buf, p + n - col * k.nslots, col * k.nslots) != 0))
			abort();
		free(buf);
	}
}

static void exercise(const uint8_t *p, size_t size)
{
	struct bfs_ixpack *pk = NULL;
	struct bfs_index_key k = { "/fuzz/none", 1, 0, 0 };
	struct bfs_index *ix = NULL;
	char why[256], path[4097];
	bool had;
	/* loaded from a file, as a mount loads one */
	int fd = bfs_fuzz_memfd("ixpack", p, size, path, sizeof(path));
	enum bfs_index_load_result r =
		fd < 0 ? BFS_INDEX_ABSENT : bfs_ixpack_load(&pk, path, why, sizeof(why));

	if (fd >= 0)
		close(fd);
	if (r != BFS_INDEX_LOADED)
		return;
	if (bfs_ixpack_get(pk, &k, &ix, &had, why, sizeof(why)) == BFS_INDEX_LOADED)
		fuzz_check_index(ix, &k);
	for (size_t i = 0; i < bfs_ixpack_count(pk); i++) {
		const uint8_t *e;
		uint64_t h;
		size_t len;

		bfs_ixpack_entry(pk, i, &h, &e, &len);
		exercise_counts(pk, e, len);
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

/* A counts entry's table hash and CRCs, as if it were sound. */
static void fix_counts(uint8_t *row, uint8_t *e, size_t len)
{
	uint32_t pathlen;

	memcpy(&pathlen, e + 44, 4);
	if (pathlen <= len - 64 && pathlen < 4096) {
		char path[4096];

		memcpy(path, e + 64, pathlen);
		path[pathlen] = '\0';
		put64(row, bfs_ixpack_hash(path));
	}
	put32(e + 52, bfs_crc32c(0, e + 64, len - 64));
	put32(e + 60, bfs_crc32c(0, e, 60));
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
		if (off > size || len > size - off || len < 64 || off < 64 + 24 * n)
			continue;
		if (memcmp(copy + off, "BFSCNT", 6) == 0) {
			fix_counts(copy + 64 + 24 * i, copy + off, (size_t)len);
			continue;
		}
		if (len < 128)
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
