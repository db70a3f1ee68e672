/* SPDX-License-Identifier: Apache-2.0 */
/*
 * counts.c — the ragged count cache file: its description of the slots,
 * save, and the checks of a load (format in counts.h).
 *
 * A loaded file is untrusted bytes: the header is checked against its own
 * CRC before any field is used, the size it implies against the file's,
 * and the body against the body CRC before the load reports success.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "counts.h"

#include "cachehdr.h"
#include "crc32c.h"
#include "schema.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAGIC "BFSCNT01" /* family BFSCNT: other versions are rebuilt, never read */
#define HDR_BYTES 64
#define PATH_MAX_LEN 65536u
#define DESC_MAX_LEN (1u << 20)

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the file is native little-endian");

struct bfs_counts_hdr {
	struct bfs_cachehdr head; /* MAGIC, HDR_BYTES */
	uint32_t comp;
	uint64_t file_size;
	int64_t mtime_ns;
	uint64_t nrecords;
	uint32_t nslots;
	uint32_t pathlen;
	uint32_t desclen;
	uint32_t body_crc; /* CRC-32C of bytes [HDR_BYTES, end of file) */
	uint32_t reserved;
	uint32_t hdr_crc; /* CRC-32C of the 60 bytes before it */
};
_Static_assert(sizeof(struct bfs_counts_hdr) == HDR_BYTES, "header is 64 bytes");
_Static_assert(offsetof(struct bfs_counts_hdr, hdr_crc) == HDR_BYTES - 4, "its CRC ends it");

/* ---- the description ------------------------------------------------------- */

/* One slot: "v" (values) or "b" (bytes of a bytes feature), the kind's
 * name, the name's length, the name: "v int64 6 tokens\n". Length-prefixed,
 * so any name (even one holding a newline) reads one way only. */
int bfs_counts_desc(const struct bfs_plan *p, char **out, size_t *len)
{
	char *buf = NULL;
	size_t cap = 0;
	FILE *f = open_memstream(&buf, &cap);

	if (!f)
		return -ENOMEM;
	for (size_t s = 0; s < p->nslots; s++) {
		for (size_t t = 0; t < p->ntensors; t++) {
			const struct bfs_tensor_tmpl *tm = &p->t[t];
			bool bytes_slot;

			if (tm->role != BFS_ROLE_VALUES || tm->ragged_slot < 0)
				continue;
			bytes_slot = tm->spec->layout == BFS_LAYOUT_RAGGED2 &&
				     (size_t)tm->ragged_slot + 1 == s;
			if ((size_t)tm->ragged_slot != s && !bytes_slot)
				continue;
			fprintf(f, "%c %s %zu %s\n", bytes_slot ? 'b' : 'v',
				bfs_kind_name(tm->spec->kind), strlen(tm->spec->name),
				tm->spec->name);
			break;
		}
	}
	if (fclose(f) != 0) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	*len = cap;
	return 0;
}

/* ---- layout ---------------------------------------------------------------- */

/* Where the columns start and the file's size; false when they overflow. */
static bool layout_of(const struct bfs_counts_hdr *h, uint64_t *cols_off, uint64_t *total)
{
	uint64_t col_bytes, all;

	if (h->pathlen > PATH_MAX_LEN || h->desclen > DESC_MAX_LEN || h->nrecords > UINT64_MAX / 4)
		return false;
	*cols_off = ((uint64_t)HDR_BYTES + h->pathlen + h->desclen + 7) / 8 * 8;
	col_bytes = h->nrecords * 4;
	if (h->nslots && col_bytes > UINT64_MAX / h->nslots)
		return false;
	all = col_bytes * h->nslots;
	return !__builtin_add_overflow(*cols_off, all, total);
}

static void fill_hdr(struct bfs_counts_hdr *h, const struct bfs_counts_key *k)
{
	bfs_cachehdr_init(h, sizeof(*h), MAGIC);
	h->comp = k->comp;
	h->file_size = k->file_size;
	h->mtime_ns = k->mtime_ns;
	h->nrecords = k->nrecords;
	h->nslots = k->nslots;
	h->pathlen = (uint32_t)strlen(k->path);
	h->desclen = (uint32_t)k->desclen;
}

/* ---- save ------------------------------------------------------------------ */

int bfs_counts_save(const char *path, const struct bfs_counts_key *k, const uint32_t *const *cols)
{
	static const uint8_t zeros[8];
	struct bfs_counts_hdr h;
	uint64_t cols_off, total;
	struct iovec *iov;
	size_t n = 0;
	uint32_t crc = 0;
	int rc;

	if (strlen(k->path) > PATH_MAX_LEN || k->desclen > DESC_MAX_LEN)
		return -EINVAL;
	fill_hdr(&h, k);
	if (!layout_of(&h, &cols_off, &total) || k->nrecords * 4 > SIZE_MAX)
		return -EINVAL;
	/* the header, the path, the description, the padding, a column per
	 * slot: the body's CRC first, then the file in one go */
	iov = malloc(((size_t)k->nslots + 4) * sizeof(*iov));
	if (!iov)
		return -ENOMEM;
	iov[n++] = (struct iovec){ &h, sizeof(h) };
	iov[n++] = (struct iovec){ (void *)(uintptr_t)k->path, h.pathlen };
	iov[n++] = (struct iovec){ (void *)(uintptr_t)k->desc, k->desclen };
	iov[n++] = (struct iovec){ (void *)(uintptr_t)zeros,
				   (size_t)(cols_off - HDR_BYTES - h.pathlen - k->desclen) };
	for (uint32_t s = 0; s < k->nslots; s++)
		iov[n++] = (struct iovec){ (void *)(uintptr_t)cols[s], (size_t)(k->nrecords * 4) };
	for (size_t i = 1; i < n; i++)
		crc = bfs_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
	h.body_crc = crc;
	bfs_cachehdr_seal(&h, sizeof(h));
	rc = bfs_write_file_atomic(path, iov, n);
	free(iov);
	return rc;
}

/* ---- in memory ------------------------------------------------------------- */

uint64_t bfs_counts_file_bytes(const struct bfs_counts_key *k)
{
	struct bfs_counts_hdr h;
	uint64_t cols_off, total;

	if (strlen(k->path) > PATH_MAX_LEN || k->desclen > DESC_MAX_LEN)
		return UINT64_MAX;
	fill_hdr(&h, k);
	return layout_of(&h, &cols_off, &total) ? total : UINT64_MAX;
}

int bfs_counts_image(const struct bfs_counts_key *k, const uint32_t *const *cols, uint8_t **out,
		     size_t *len)
{
	struct bfs_counts_hdr h;
	uint64_t cols_off, total;
	size_t n;
	uint8_t *buf;

	if (strlen(k->path) > PATH_MAX_LEN || k->desclen > DESC_MAX_LEN)
		return -EINVAL;
	fill_hdr(&h, k);
	if (!layout_of(&h, &cols_off, &total) || total > SIZE_MAX)
		return -EINVAL;
	buf = calloc(1, (size_t)total); /* the padding zeroed */
	if (!buf)
		return -ENOMEM;
	memcpy(buf + HDR_BYTES, k->path, h.pathlen);
	memcpy(buf + HDR_BYTES + h.pathlen, k->desc, k->desclen);
	n = (size_t)k->nrecords * 4;
	for (uint32_t s = 0; s < k->nslots; s++)
		memcpy(buf + cols_off + (uint64_t)s * n, cols[s], n);
	h.body_crc = bfs_crc32c(0, buf + HDR_BYTES, (size_t)(total - HDR_BYTES));
	bfs_cachehdr_seal(&h, sizeof(h));
	memcpy(buf, &h, sizeof(h));
	*out = buf;
	*len = (size_t)total;
	return 0;
}

bool bfs_counts_image_key(const uint8_t *p, size_t len, struct bfs_counts_key *k, char *path,
			  size_t cap)
{
	struct bfs_counts_hdr h;

	if (len < HDR_BYTES)
		return false;
	memcpy(&h, p, sizeof(h));
	if (!bfs_cachehdr_check(&h, sizeof(h), len, MAGIC, "counts file", "counts", NULL, 0))
		return false;
	if (h.pathlen >= cap || h.pathlen > len - HDR_BYTES ||
	    h.desclen > len - HDR_BYTES - h.pathlen)
		return false;
	memcpy(path, p + HDR_BYTES, h.pathlen);
	path[h.pathlen] = '\0';
	if (strlen(path) != h.pathlen) /* a NUL inside: no path of a shard */
		return false;
	k->path = path;
	k->comp = h.comp;
	k->file_size = h.file_size;
	k->mtime_ns = h.mtime_ns;
	k->nrecords = h.nrecords;
	k->nslots = h.nslots;
	k->desc = (const char *)p + HDR_BYTES + h.pathlen;
	k->desclen = h.desclen;
	return true;
}

/* ---- load ------------------------------------------------------------------ */

/* The file's bytes: a descriptor, or memory. */
struct src {
	int fd; /* -1: p */
	const uint8_t *p;
	uint64_t size;
};

static bool src_read(const struct src *s, void *dst, size_t n, uint64_t off)
{
	size_t got = 0;

	if (off > s->size || n > s->size - off)
		return false;
	if (s->fd < 0) {
		memcpy(dst, s->p + off, n);
		return true;
	}
	while (got < n) {
		ssize_t r = pread(s->fd, (uint8_t *)dst + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

#define BAD(...) (snprintf(why, whycap, __VA_ARGS__), BFS_COUNTS_BAD)

static enum bfs_counts_result check(const struct src *s, const struct bfs_counts_key *k,
				    uint32_t *const *cols, char *why, size_t whycap)
{
	struct bfs_counts_hdr h;
	uint64_t cols_off, total;
	uint8_t *head = NULL;
	size_t head_len;
	uint32_t crc = 0;
	bool same;

	memset(&h, 0, sizeof(h));
	(void)src_read(s, &h, s->size < sizeof(h) ? (size_t)s->size : sizeof(h), 0);
	if (!bfs_cachehdr_check(&h, sizeof(h), s->size, MAGIC, "counts file", "counts", why,
				whycap))
		return BFS_COUNTS_BAD;
	if (h.head.hdr_bytes != HDR_BYTES)
		return BAD("unsupported layout (header of %" PRIu32 " bytes)", h.head.hdr_bytes);
	if (h.comp != k->comp || h.file_size != k->file_size || h.mtime_ns != k->mtime_ns ||
	    h.nrecords != k->nrecords || h.nslots != k->nslots || h.pathlen != strlen(k->path) ||
	    h.desclen != k->desclen) {
		snprintf(why, whycap, "made for another version of the shard or other features");
		return BFS_COUNTS_STALE;
	}
	if (!layout_of(&h, &cols_off, &total))
		return BAD("invalid header counts");
	if (total != s->size)
		return BAD("%s (%" PRIu64 " bytes, the header says %" PRIu64 ")",
			   s->size < total ? "truncated" : "wrong size", s->size, total);
	if (h.nrecords * 4 > SIZE_MAX)
		return BAD("too large for this machine");
	head_len = (size_t)(cols_off - HDR_BYTES);
	head = malloc(head_len ? head_len : 1);
	if (!head)
		return BFS_COUNTS_ABSENT;
	if (!src_read(s, head, head_len, HDR_BYTES)) {
		free(head);
		return BFS_COUNTS_ABSENT;
	}
	crc = bfs_crc32c(crc, head, head_len);
	same = memcmp(head, k->path, h.pathlen) == 0 &&
	       memcmp(head + h.pathlen, k->desc, h.desclen) == 0;
	free(head);
	if (!cols) /* the checks only: bytes in memory (bfs_counts_from_bytes) */
		crc = bfs_crc32c(crc, s->p + cols_off, (size_t)(total - cols_off));
	for (uint32_t c = 0; cols && c < h.nslots; c++) {
		size_t n = (size_t)(h.nrecords * 4);
		if (!src_read(s, cols[c], n, cols_off + (uint64_t)c * n))
			return BFS_COUNTS_ABSENT;
		crc = bfs_crc32c(crc, cols[c], n);
	}
	if (crc != h.body_crc)
		return BAD("corrupt (checksum mismatch)");
	if (!same) { /* another shard whose path hashes the same, or other slots */
		snprintf(why, whycap, "made for another shard or other features");
		return BFS_COUNTS_STALE;
	}
	return BFS_COUNTS_LOADED;
}

enum bfs_counts_result bfs_counts_load(const char *path, const struct bfs_counts_key *k,
				       uint32_t *const *cols, char *why, size_t whycap)
{
	struct src s = { .fd = cols ? open(path, O_RDONLY | O_CLOEXEC) : -1 };
	struct stat st;
	enum bfs_counts_result r;

	if (s.fd < 0)
		return BFS_COUNTS_ABSENT;
	if (fstat(s.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(s.fd);
		return BFS_COUNTS_ABSENT;
	}
	s.size = (uint64_t)st.st_size;
	r = check(&s, k, cols, why, whycap);
	close(s.fd);
	return r;
}

enum bfs_counts_result bfs_counts_from_bytes(const uint8_t *p, size_t len,
					     const struct bfs_counts_key *k, uint32_t *const *cols,
					     char *why, size_t whycap)
{
	struct src s = { .fd = -1, .p = p, .size = len };

	return check(&s, k, cols, why, whycap);
}
