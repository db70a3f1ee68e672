/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_counts.c — fuzz target for counts.c: the bytes are a ragged counts
 * cache file (untrusted: anyone who can write the index directory writes
 * them). They are loaded twice: as they are, against a fixed key, and with
 * the two CRCs recomputed and the key taken from the file itself, so that
 * mutations reach the checks behind the CRCs (sizes, the path and the
 * description). A load must never write outside the columns it was given,
 * and a LOADED one must hold exactly the file's column bytes (ASan/UBSan
 * builds replay the corpus). The checks without columns (how a counts
 * pack's entries are checked before they are carried into a new pack) must
 * say what the checks with them say, and the key a file's bytes claim
 * (bfs_counts_image_key), when it loads, must rebuild the very file size
 * and an image that loads the same columns.
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

/* The image of loaded columns loads them again, under the key its bytes
 * claim. */
static void round_trip(const struct bfs_counts_key *k, uint32_t *const *cols)
{
	struct bfs_counts_key k2;
	char path[65537], why[256];
	uint8_t *img = NULL;
	size_t len = 0;

	if (bfs_counts_image(k, (const uint32_t *const *)cols, &img, &len) != 0)
		return;
	if (!bfs_counts_image_key(img, len, &k2, path, sizeof(path)) ||
	    strcmp(k2.path, k->path) != 0 || k2.desclen != k->desclen ||
	    memcmp(k2.desc, k->desc, k->desclen) != 0 || k2.nrecords != k->nrecords ||
	    k2.nslots != k->nslots ||
	    bfs_counts_from_bytes(img, len, k, NULL, why, sizeof(why)) != BFS_COUNTS_LOADED)
		abort();
	free(img);
}

static void exercise(const uint8_t *p, size_t size, const struct bfs_counts_key *k)
{
	uint32_t **cols;
	enum bfs_counts_result r;
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
	r = bfs_counts_from_bytes(p, size, k, cols, why, sizeof(why));
	if (bfs_counts_from_bytes(p, size, k, NULL, why, sizeof(why)) != r)
		abort();
	if (r == BFS_COUNTS_LOADED) {
		if (off + (uint64_t)n * k->nslots != size || bfs_counts_file_bytes(k) != size)
			abort();
		for (uint32_t s = 0; s < k->nslots; s++)
			if (memcmp(cols[s], p + off + (uint64_t)s * n, n) != 0)
				abort();
		round_trip(k, cols);
	}
	for (uint32_t s = 0; s < k->nslots; s++)
		free(cols[s]);
	free(cols);
}

/* The key the bytes claim: a file that loads under it is that file. */
static void exercise_claim(const uint8_t *p, size_t size)
{
	struct bfs_counts_key k;
	char path[4097];

	if (bfs_counts_image_key(p, size, &k, path, sizeof(path)))
		exercise(p, size, &k);
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
	exercise_claim(data, size);
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
	exercise_claim(copy, size);
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
