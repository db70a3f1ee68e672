/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ixpack.c — the index pack file: load and its checks, lookup, writing
 * (format in ixpack.h).
 *
 * A loaded file is untrusted bytes: the header is checked against its own
 * CRC before any field is used, the table against its CRC, and every table
 * entry's bounds before an entry is handed out; an entry's own bytes go
 * through every check of an index file (bfs_index_from_bytes).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ixpack.h"

#include "cachehdr.h"
#include "crc32c.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAGIC "BFSPAK01" /* family BFSPAK: other versions are rebuilt, never read */
#define HDR_BYTES 64
#define ALIGN 16

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the file is native little-endian");

struct bfs_ixpack_hdr {
	struct bfs_cachehdr head; /* MAGIC, HDR_BYTES */
	uint32_t align; /* ALIGN */
	uint64_t nentries;
	uint64_t file_bytes; /* the whole file */
	uint32_t table_crc; /* CRC-32C of the table */
	uint8_t reserved[24];
	uint32_t hdr_crc; /* CRC-32C of the 60 bytes before it */
};
_Static_assert(sizeof(struct bfs_ixpack_hdr) == HDR_BYTES, "header is 64 bytes");
_Static_assert(offsetof(struct bfs_ixpack_hdr, hdr_crc) == HDR_BYTES - 4, "its CRC ends it");

struct slot {
	uint64_t hash, off, len;
};
_Static_assert(sizeof(struct slot) == 24, "table entry is 24 bytes");

struct bfs_ixpack {
	uint8_t *bytes; /* the file */
	size_t len;
	const struct slot *table;
	size_t n;
};

uint64_t bfs_ixpack_hash(const char *path)
{
	return bfs_fnv1a(0xcbf29ce484222325ull, path, strlen(path));
}

/* ---- load ------------------------------------------------------------------ */

#define BAD(...) (snprintf(why, whycap, __VA_ARGS__), BFS_INDEX_BAD)

/* Checks the pack in pk->bytes (pk->len bytes, 8-aligned) and sets its table. */
static enum bfs_index_load_result check(struct bfs_ixpack *pk, char *why, size_t whycap)
{
	struct bfs_ixpack_hdr h;
	const struct slot *t;
	uint64_t table_end;

	memset(&h, 0, sizeof(h));
	memcpy(&h, pk->bytes, pk->len < sizeof(h) ? pk->len : sizeof(h));
	if (!bfs_cachehdr_check(&h, sizeof(h), pk->len, MAGIC, "index pack", "index pack", why,
				whycap))
		return BFS_INDEX_BAD;
	if (h.head.hdr_bytes != HDR_BYTES || h.align != ALIGN)
		return BAD("unsupported layout (header %" PRIu32 ", alignment %" PRIu32 ")",
			   h.head.hdr_bytes, h.align);
	if (h.file_bytes != pk->len)
		return BAD("%s (%zu bytes, the header says %" PRIu64 ")",
			   pk->len < h.file_bytes ? "truncated" : "wrong size", pk->len,
			   h.file_bytes);
	if (h.nentries > (pk->len - HDR_BYTES) / sizeof(struct slot))
		return BAD("invalid entry count %" PRIu64, h.nentries);
	table_end = HDR_BYTES + h.nentries * sizeof(struct slot);
	if (bfs_crc32c(0, pk->bytes + HDR_BYTES, (size_t)(table_end - HDR_BYTES)) != h.table_crc)
		return BAD("corrupt table (checksum mismatch)");
	t = (const struct slot *)(const void *)(pk->bytes + HDR_BYTES);
	for (uint64_t i = 0; i < h.nentries; i++) {
		if (t[i].off % ALIGN || t[i].off < table_end || t[i].off > pk->len ||
		    t[i].len > pk->len - t[i].off)
			return BAD("invalid table entry %" PRIu64, i);
		if (i && t[i].hash < t[i - 1].hash)
			return BAD("table entry %" PRIu64 " out of order", i);
	}
	pk->table = t;
	pk->n = (size_t)h.nentries;
	return BFS_INDEX_LOADED;
}

static enum bfs_index_load_result adopt(struct bfs_ixpack **out, uint8_t *bytes, size_t len,
					char *why, size_t whycap)
{
	struct bfs_ixpack *pk = calloc(1, sizeof(*pk));
	enum bfs_index_load_result r;

	if (!pk) {
		free(bytes);
		return BFS_INDEX_ABSENT;
	}
	pk->bytes = bytes;
	pk->len = len;
	r = check(pk, why, whycap);
	if (r == BFS_INDEX_LOADED)
		*out = pk;
	else
		bfs_ixpack_free(pk);
	return r;
}

enum bfs_index_load_result bfs_ixpack_load(struct bfs_ixpack **out, const char *path, char *why,
					   size_t whycap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t *buf;
	size_t got = 0;

	if (fd < 0)
		return BFS_INDEX_ABSENT;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > SIZE_MAX / 2 ||
	    !(buf = malloc(st.st_size ? (size_t)st.st_size : 1))) {
		close(fd);
		return BFS_INDEX_ABSENT;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	/* a file that shrank under us reads as truncated */
	return adopt(out, buf, got, why, whycap);
}

void bfs_ixpack_free(struct bfs_ixpack *pk)
{
	if (!pk)
		return;
	free(pk->bytes);
	free(pk);
}

uint64_t bfs_ixpack_dir_hash(const char *abs)
{
	const char *slash = strrchr(abs, '/');

	return bfs_fnv1a(0xcbf29ce484222325ull, abs, slash ? (size_t)(slash - abs) : 0);
}

size_t bfs_ixpack_find(const struct bfs_ixpack *pk, uint64_t hash)
{
	size_t lo = 0, hi = pk->n;

	while (lo < hi) { /* the first entry with hash >= h */
		size_t mid = lo + (hi - lo) / 2;

		if (pk->table[mid].hash < hash)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

enum bfs_index_load_result bfs_ixpack_get(const struct bfs_ixpack *pk,
					  const struct bfs_index_key *k, struct bfs_index **out,
					  bool *had_entry, char *why, size_t whycap)
{
	uint64_t h = bfs_ixpack_hash(k->path);
	enum bfs_index_load_result res = BFS_INDEX_ABSENT;

	*had_entry = false;
	/* equal hashes: another shard's path may hash the same (its entry
	 * reads ABSENT: the path is checked) */
	for (size_t i = bfs_ixpack_find(pk, h); i < pk->n && pk->table[i].hash == h; i++) {
		const struct slot *s = &pk->table[i];
		enum bfs_index_load_result r;

		*had_entry = true;
		r = bfs_index_from_bytes(out, pk->bytes + s->off, (size_t)s->len, k, why, whycap);
		if (r == BFS_INDEX_LOADED)
			return r;
		if (r == BFS_INDEX_BAD)
			res = r;
	}
	return res;
}

size_t bfs_ixpack_count(const struct bfs_ixpack *pk)
{
	return pk->n;
}

void bfs_ixpack_entry(const struct bfs_ixpack *pk, size_t i, uint64_t *hash, const uint8_t **p,
		      size_t *len)
{
	*hash = pk->table[i].hash;
	*p = pk->bytes + pk->table[i].off;
	*len = (size_t)pk->table[i].len;
}

/* ---- writing --------------------------------------------------------------- */

struct wentry {
	uint64_t hash;
	uint8_t *p;
	size_t len;
};

struct bfs_ixpack_writer {
	struct wentry *e;
	size_t n, cap;
};

int bfs_ixpack_writer_new(struct bfs_ixpack_writer **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void bfs_ixpack_writer_free(struct bfs_ixpack_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++)
		free(w->e[i].p);
	free(w->e);
	free(w);
}

/* Takes p (malloc'd), also on failure. */
static int push(struct bfs_ixpack_writer *w, uint64_t hash, uint8_t *p, size_t len)
{
	if (w->n == w->cap) {
		size_t nc = w->cap ? w->cap * 2 : 64;
		struct wentry *ne = realloc(w->e, nc * sizeof(*ne));

		if (!ne) {
			free(p);
			return -ENOMEM;
		}
		w->e = ne;
		w->cap = nc;
	}
	w->e[w->n++] = (struct wentry){ hash, p, len };
	return 0;
}

int bfs_ixpack_add(struct bfs_ixpack_writer *w, const struct bfs_index *ix,
		   const struct bfs_index_key *k)
{
	uint8_t *p = NULL;
	size_t len = 0;
	int rc = bfs_index_image(ix, k, &p, &len);

	return rc ? rc : push(w, bfs_ixpack_hash(k->path), p, len);
}

int bfs_ixpack_add_bytes(struct bfs_ixpack_writer *w, uint64_t hash, const uint8_t *p, size_t len)
{
	uint8_t *c = malloc(len ? len : 1);

	if (!c)
		return -ENOMEM;
	memcpy(c, p, len);
	return push(w, hash, c, len);
}

static int went_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct wentry *)a)->hash, y = ((const struct wentry *)b)->hash;

	return x < y ? -1 : x > y;
}

int bfs_ixpack_write(struct bfs_ixpack_writer *w, const char *path)
{
	struct bfs_ixpack_hdr h;
	struct slot *t;
	uint64_t off, total;
	struct iovec iov;
	uint8_t *buf;
	int rc;

	if (w->n == 0)
		return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
	qsort(w->e, w->n, sizeof(*w->e), went_cmp);
	off = HDR_BYTES + (uint64_t)w->n * sizeof(struct slot);
	for (size_t i = 0; i < w->n; i++)
		off = (off + ALIGN - 1) / ALIGN * ALIGN + w->e[i].len;
	total = off;
	if (total > SIZE_MAX)
		return -EFBIG;
	/* one buffer, one write: the pack of 20,000 tiny shards is ~5 MB */
	buf = calloc(1, (size_t)total);
	if (!buf)
		return -ENOMEM;
	t = (struct slot *)(void *)(buf + HDR_BYTES);
	off = HDR_BYTES + (uint64_t)w->n * sizeof(struct slot);
	for (size_t i = 0; i < w->n; i++) {
		off = (off + ALIGN - 1) / ALIGN * ALIGN;
		t[i] = (struct slot){ w->e[i].hash, off, w->e[i].len };
		memcpy(buf + off, w->e[i].p, w->e[i].len);
		off += w->e[i].len;
	}
	bfs_cachehdr_init(&h, sizeof(h), MAGIC);
	h.align = ALIGN;
	h.nentries = w->n;
	h.file_bytes = total;
	h.table_crc = bfs_crc32c(0, t, w->n * sizeof(struct slot));
	bfs_cachehdr_seal(&h, sizeof(h));
	memcpy(buf, &h, sizeof(h));
	iov = (struct iovec){ buf, (size_t)total };
	rc = bfs_write_file_atomic(path, &iov, 1);
	free(buf);
	return rc;
}
