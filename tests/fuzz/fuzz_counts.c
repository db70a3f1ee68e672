/*
 * fuzz_counts.c — fuzz target for counts.c: the bytes are a ragged counts
 * cache file (untrusted: anyone who can write the index directory writes
 * them). They are loaded twice: as they are, against a fixed key, and with
 * the two CRCs recomputed and the key taken from the file itself, so that
 * mutations reach the checks behind the CRCs (sizes, the path and the
 * description). A load must never write outside the columns it was given,
 * and a LOADED one must hold exactly the file's column bytes (ASan/UBSan
 * builds replay the corpus).
 *
 * Offsets used for the fix-up (counts.c, struct bfs_counts_hdr): comp at
 * 12, file size at 16, mtime at 24, records at 32, slots at 40, pathlen at
 * 44, desclen at 48, body CRC at 52, header CRC at 60, header 64 bytes; the
 * path, then the description, right after it.
 */
#include "counts.h"
#include "crc32c.h"

#include <stdlib.h>
#include <string.h>

int bfs_fuzz_counts(const uint8_t *data, size_t size);

static void exercise(const uint8_t *p, size_t size, const struct bfs_counts_key *k)
{
	uint32_t **cols;
	size_t n = (size_t)k->nrecords * 4;
	char why[256];
	uint64_t off = (64 + (uint64_t)strlen(k->path) + k->desclen + 7) / 8 * 8;

	/* a file that holds its columns at all is no larger than itself */
	if (k->nslots > 64 || (k->nslots && k->nrecords > size / 4 / k->nslots))
		return;
	cols = calloc(k->nslots ? k->nslots : 1, sizeof(*cols));
	if (!cols)
		return;
	for (uint32_t s = 0; s < k->nslots; s++)
		cols[s] = malloc(n ? n : 1);
	if (bfs_counts_from_bytes(p, size, k, cols, why, sizeof(why)) == BFS_COUNTS_LOADED) {
		if (off + (uint64_t)n * k->nslots != size)
			abort();
		for (uint32_t s = 0; s < k->nslots; s++)
			if (memcmp(cols[s], p + off + (uint64_t)s * n, n) != 0)
				abort();
	}
	for (uint32_t s = 0; s < k->nslots; s++)
		free(cols[s]);
	free(cols);
}

int bfs_fuzz_counts(const uint8_t *data, size_t size)
{
	struct bfs_counts_key k = { .path = "/fuzz/shard",
				    .comp = 0,
				    .file_size = 100,
				    .mtime_ns = 1,
				    .nrecords = 3,
				    .nslots = 2,
				    .desc = "v int64 1 t\n",
				    .desclen = 12 };
	char path[4097], desc[4097];
	uint8_t *copy;
	uint32_t pathlen, desclen, crc;

	exercise(data, size, &k);
	if (size < 64)
		return 0;
	copy = malloc(size);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	memcpy(&k.comp, copy + 12, 4);
	memcpy(&k.file_size, copy + 16, 8);
	memcpy(&k.mtime_ns, copy + 24, 8);
	memcpy(&k.nrecords, copy + 32, 8);
	memcpy(&k.nslots, copy + 40, 4);
	memcpy(&pathlen, copy + 44, 4);
	memcpy(&desclen, copy + 48, 4);
	if (pathlen >= sizeof(path) || pathlen > size - 64)
		pathlen = 0;
	memcpy(path, copy + 64, pathlen);
	path[pathlen] = '\0';
	if (strlen(path) != pathlen) { /* a NUL inside: make it the path's end */
		pathlen = (uint32_t)strlen(path);
		memcpy(copy + 44, &pathlen, 4);
	}
	if (desclen >= sizeof(desc) || desclen > size - 64 - pathlen)
		desclen = 0;
	memcpy(desc, copy + 64 + pathlen, desclen);
	k.path = path;
	k.desc = desc;
	k.desclen = desclen;
	memcpy(copy + 48, &desclen, 4);
	crc = bfs_crc32c(0, copy + 64, size - 64);
	memcpy(copy + 52, &crc, 4);
	crc = bfs_crc32c(0, copy, 60);
	memcpy(copy + 60, &crc, 4);
	exercise(copy, size, &k);
	free(copy);
	return 0;
}

#ifdef BFS_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return bfs_fuzz_counts(data, size);
}
#endif
