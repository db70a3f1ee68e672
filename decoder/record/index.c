/* SPDX-License-Identifier: Apache-2.0 */
/*
 * index.c — the compact record index: building during a scan, the cache
 * file (save, load by mapping, every check a load makes). The format is in
 * index.h.
 *
 * A loaded file is untrusted bytes: every count is checked against the
 * file's size before use, the body against its CRC-32C, and every directory
 * entry and seek point against the bounds the accessors rely on.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "index.h"

#include "cachehdr.h"
#include "crc32c.h"
#include "tfrecord.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAGIC "BFSIDX03" /* family BFSIDX: another version is rebuilt, never read */
#define HDR_BYTES 128
#define POS_MASK (((uint64_t)1 << 40) - 1)
#define STRIDE_MAX (((uint64_t)1 << 20) - 1)
#define PAD 8 /* zero bytes closing the delta area */
#define MAP_MIN 4096 /* smaller files are read, not mapped (a mapping is a VMA) */

_Static_assert(sizeof(struct bfs_index_entry) == 16, "directory entry is 16 bytes");
_Static_assert(sizeof(struct bfs_seek_point) == 32792, "seek point layout");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the file is native little-endian");

struct bfs_index_hdr {
	struct bfs_cachehdr head; /* MAGIC, HDR_BYTES */
	uint32_t comp;
	uint64_t file_size;
	int64_t mtime_ns;
	uint64_t nrecords;
	uint64_t nblocks;
	uint64_t deltas_bytes;
	uint64_t nseek;
	uint64_t end_offset; /* offset n: the end of the last record */
	uint32_t max_len;
	uint32_t block; /* BFS_INDEX_BLOCK */
	uint32_t pathlen;
	uint32_t seek_size; /* sizeof(struct bfs_seek_point) */
	uint32_t body_crc; /* CRC-32C of bytes [HDR_BYTES, end of file) */
	uint8_t reserved[32];
	uint32_t hdr_crc; /* CRC-32C of the 124 bytes before it */
};
_Static_assert(sizeof(struct bfs_index_hdr) == HDR_BYTES, "header is 128 bytes");
_Static_assert(offsetof(struct bfs_index_hdr, hdr_crc) == HDR_BYTES - 4, "its CRC ends it");

struct bfs_index_build {
	uint64_t cur[BFS_INDEX_BLOCK]; /* offsets of the block being filled */
	unsigned ncur;
	struct bfs_index_entry *dir;
	size_t ndir, dir_cap;
	uint8_t *deltas;
	size_t dlen, dcap;
	struct bfs_seek_point *pts;
	size_t npts, pts_cap;
	uint64_t next; /* end of the last record pushed */
	bool finished;
};

/* ---- building ------------------------------------------------------------ */

int bfs_index_new(struct bfs_index **out)
{
	struct bfs_index *ix = calloc(1, sizeof(*ix));

	if (!ix || !(ix->b = calloc(1, sizeof(*ix->b)))) {
		free(ix);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	*out = ix;
	return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 16;
	size_t bytes;
	void *np;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		if (__builtin_mul_overflow(ncap, 2, &ncap))
			return -ENOMEM;
	if (__builtin_mul_overflow(ncap, elem, &bytes))
		return -ENOMEM;
	np = realloc(*p, bytes);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

/* Encode the cnt offsets of b->cur as one block. */
static int flush_block(struct bfs_index_build *b, unsigned cnt)
{
	uint64_t base = b->cur[0], stride = STRIDE_MAX, maxres;
	unsigned w = 0;
	struct bfs_index_entry *e;

	if (cnt < 2)
		stride = 0;
	for (unsigned j = 1; j < cnt; j++)
		if (b->cur[j] - b->cur[j - 1] < stride)
			stride = b->cur[j] - b->cur[j - 1];
	maxres = b->cur[cnt - 1] - base - (cnt - 1) * stride; /* residuals only grow */
	while (w < 8 && (maxres >> (8 * w)) != 0)
		w++;
	if (b->dlen > POS_MASK ||
	    grow((void **)&b->dir, &b->dir_cap, b->ndir + 1, sizeof(*b->dir)) != 0 ||
	    grow((void **)&b->deltas, &b->dcap, b->dlen + cnt * w + PAD, 1) != 0)
		return bfs_err_set(-ENOMEM, "out of memory growing the index");
	e = &b->dir[b->ndir++];
	e->base = base;
	e->meta = (uint64_t)b->dlen | (uint64_t)w << 40 | stride << 44;
	for (unsigned j = 0; j < cnt; j++) {
		uint64_t r = htole64(b->cur[j] - base - j * stride);

		memcpy(b->deltas + b->dlen, &r, w);
		b->dlen += w;
	}
	b->ncur = 0;
	return 0;
}

int bfs_index_push(struct bfs_index *ix, uint64_t offset, uint32_t len)
{
	struct bfs_index_build *b = ix->b;
	uint64_t end;

	if (!b || b->finished)
		return bfs_err_set(-EINVAL, "index: already finished");
	if (ix->n && offset != b->next)
		return bfs_err_set(-EINVAL,
				   "index: record %" PRIu64 " at offset %" PRIu64
				   " does not follow the previous one (which ends at %" PRIu64 ")",
				   ix->n, offset, b->next);
	if (len > BFS_RECORD_MAX_LEN)
		return bfs_err_set(-EFBIG,
				   "index: record %" PRIu64 ": length %" PRIu32 " too large", ix->n,
				   len);
	if (__builtin_add_overflow(offset, (uint64_t)len + 16, &end))
		return bfs_err_set(-EINVAL, "index: record %" PRIu64 ": offset overflows", ix->n);
	b->cur[b->ncur++] = offset;
	if (b->ncur == BFS_INDEX_BLOCK) {
		int err = flush_block(b, b->ncur);
		if (err) {
			b->ncur--;
			return err;
		}
	}
	b->next = end;
	ix->n++;
	if (len > ix->max_len)
		ix->max_len = len;
	return 0;
}

struct bfs_seek_point *bfs_index_add_point(struct bfs_index *ix)
{
	struct bfs_index_build *b = ix->b;

	if (!b || b->finished ||
	    grow((void **)&b->pts, &b->pts_cap, b->npts + 1, sizeof(*b->pts)) != 0)
		return NULL;
	return &b->pts[b->npts++];
}

void bfs_index_drop_point(struct bfs_index *ix)
{
	if (ix->b && !ix->b->finished && ix->b->npts)
		ix->b->npts--;
}

int bfs_index_finish(struct bfs_index *ix)
{
	struct bfs_index_build *b = ix->b;
	int err;

	if (!b)
		return 0; /* loaded: finished already */
	if (b->finished)
		return 0;
	b->cur[b->ncur++] = b->next; /* the end sentinel: offset n */
	err = flush_block(b, b->ncur);
	if (err)
		return err;
	memset(b->deltas + b->dlen, 0, PAD); /* room reserved by flush_block */
	b->dlen += PAD;
	b->finished = true;
	ix->dir = b->dir;
	ix->deltas = b->deltas;
	ix->pts = b->pts;
	ix->npts = b->npts;
	ix->deltas_bytes = b->dlen;
	ix->data_bytes = b->ndir * sizeof(*b->dir) + b->dlen + b->npts * sizeof(*b->pts);
	return 0;
}

void bfs_index_free(struct bfs_index *ix)
{
	if (!ix)
		return;
	if (ix->b) {
		free(ix->b->dir);
		free(ix->b->deltas);
		free(ix->b->pts);
		free(ix->b);
	}
	if (ix->map)
		munmap(ix->map, ix->map_len);
	free(ix->mem);
	free(ix);
}

uint64_t bfs_index_bytes(const struct bfs_index *ix)
{
	return ix->data_bytes;
}

/* ---- layout ---------------------------------------------------------------- */

struct layout {
	uint64_t dir, deltas, pts, total;
};

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* Section offsets from the header's counts; false when they overflow. */
static bool layout_of(const struct bfs_index_hdr *h, struct layout *l)
{
	uint64_t dir_bytes, pts_bytes;

	if (h->pathlen > 65536 || h->nblocks > UINT64_MAX / 16 ||
	    h->nseek > UINT64_MAX / sizeof(struct bfs_seek_point))
		return false;
	dir_bytes = h->nblocks * 16;
	pts_bytes = h->nseek * sizeof(struct bfs_seek_point);
	l->dir = align_up(HDR_BYTES + (uint64_t)h->pathlen, 16);
	if (__builtin_add_overflow(l->dir, dir_bytes, &l->deltas) ||
	    __builtin_add_overflow(l->deltas, h->deltas_bytes, &l->pts) || l->pts > UINT64_MAX - 8)
		return false;
	l->pts = align_up(l->pts, 8);
	return !__builtin_add_overflow(l->pts, pts_bytes, &l->total);
}

/* ---- save ------------------------------------------------------------------ */

/* The file's header and its pieces for ix and k: NIOV iovecs (header
 * first), both CRCs set. The iovecs borrow ix, k->path and static zeros.
 * -EINVAL for an unfinished index or an overlong path. */
#define NIOV 7
static int image_iov(const struct bfs_index *ix, const struct bfs_index_key *k,
		     struct bfs_index_hdr *h, struct iovec iov[NIOV])
{
	static const uint8_t zeros[16];
	struct layout l;
	uint64_t dir_bytes = ((ix->n + BFS_INDEX_BLOCK) / BFS_INDEX_BLOCK) * 16;
	uint64_t deltas_bytes = ix->deltas_bytes;
	uint32_t crc = 0;
	size_t pathlen = strlen(k->path);

	if (!ix->dir || pathlen > 65536)
		return -EINVAL;
	bfs_cachehdr_init(h, sizeof(*h), MAGIC);
	h->comp = k->comp;
	h->file_size = k->file_size;
	h->mtime_ns = k->mtime_ns;
	h->nrecords = ix->n;
	h->nblocks = dir_bytes / 16;
	h->deltas_bytes = deltas_bytes;
	h->nseek = ix->npts;
	h->end_offset = bfs_index_offset(ix, ix->n);
	h->max_len = ix->max_len;
	h->block = BFS_INDEX_BLOCK;
	h->pathlen = (uint32_t)pathlen;
	h->seek_size = sizeof(struct bfs_seek_point);
	if (!layout_of(h, &l))
		return -EINVAL;
	iov[0] = (struct iovec){ h, sizeof(*h) };
	iov[1] = (struct iovec){ (void *)(uintptr_t)k->path, pathlen };
	iov[2] = (struct iovec){ (void *)(uintptr_t)zeros, (size_t)(l.dir - HDR_BYTES - pathlen) };
	iov[3] = (struct iovec){ (void *)(uintptr_t)ix->dir, (size_t)dir_bytes };
	iov[4] = (struct iovec){ (void *)(uintptr_t)ix->deltas, (size_t)deltas_bytes };
	iov[5] = (struct iovec){ (void *)(uintptr_t)zeros,
				 (size_t)(l.pts - l.deltas - deltas_bytes) };
	iov[6] = (struct iovec){ (void *)(uintptr_t)ix->pts, ix->npts * sizeof(*ix->pts) };
	for (size_t i = 1; i < NIOV; i++)
		if (iov[i].iov_len)
			crc = bfs_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
	h->body_crc = crc;
	bfs_cachehdr_seal(h, sizeof(*h));
	return 0;
}

uint64_t bfs_index_file_bytes(const struct bfs_index *ix, const struct bfs_index_key *k)
{
	struct bfs_index_hdr h;
	struct layout l;

	memset(&h, 0, sizeof(h));
	h.pathlen = (uint32_t)strlen(k->path);
	h.nblocks = (ix->n + BFS_INDEX_BLOCK) / BFS_INDEX_BLOCK;
	h.deltas_bytes = ix->deltas_bytes;
	h.nseek = ix->npts;
	return layout_of(&h, &l) ? l.total : UINT64_MAX;
}

int bfs_index_image(const struct bfs_index *ix, const struct bfs_index_key *k, uint8_t **out,
		    size_t *len)
{
	struct bfs_index_hdr h;
	struct iovec iov[NIOV];
	size_t total = 0;
	uint8_t *buf;
	int rc = image_iov(ix, k, &h, iov);

	if (rc)
		return rc;
	for (size_t i = 0; i < NIOV; i++)
		total += iov[i].iov_len;
	buf = malloc(total);
	if (!buf)
		return -ENOMEM;
	*out = buf;
	*len = total;
	for (size_t i = 0; i < NIOV; i++) {
		if (iov[i].iov_len)
			memcpy(buf, iov[i].iov_base, iov[i].iov_len);
		buf += iov[i].iov_len;
	}
	return 0;
}

int bfs_index_save(const struct bfs_index *ix, const char *path, const struct bfs_index_key *k)
{
	struct bfs_index_hdr h;
	struct iovec iov[NIOV];
	int rc = image_iov(ix, k, &h, iov);

	/* header and body in one writev */
	return rc ? rc : bfs_write_file_atomic(path, iov, NIOV);
}

bool bfs_index_image_key(const uint8_t *p, size_t len, struct bfs_index_key *k, char *path,
			 size_t pathcap)
{
	struct bfs_index_hdr h;

	if (len < HDR_BYTES)
		return false;
	memcpy(&h, p, sizeof(h));
	if (h.pathlen >= pathcap || h.pathlen > len - HDR_BYTES)
		return false;
	memcpy(path, p + HDR_BYTES, h.pathlen);
	path[h.pathlen] = '\0';
	if (strlen(path) != h.pathlen)
		return false;
	k->path = path;
	k->comp = h.comp;
	k->file_size = h.file_size;
	k->mtime_ns = h.mtime_ns;
	return true;
}

/* ---- load ------------------------------------------------------------------ */

#define BAD(...) (snprintf(why, whycap, __VA_ARGS__), BFS_INDEX_BAD)

/* Header checks that need no more than the header: magic, version, its CRC,
 * the layout. ABSENT when it is a good header for another shard version. */
static enum bfs_index_load_result check_hdr(const struct bfs_index_hdr *h, uint64_t size,
					    const struct bfs_index_key *k, struct layout *l,
					    char *why, size_t whycap)
{
	if (!bfs_cachehdr_check(h, sizeof(*h), size, MAGIC, "index file", "index", why, whycap))
		return BFS_INDEX_BAD;
	if (h->head.hdr_bytes != HDR_BYTES || h->block != BFS_INDEX_BLOCK ||
	    h->seek_size != sizeof(struct bfs_seek_point))
		return BAD("unsupported layout (block %" PRIu32 ", seek point %" PRIu32 " bytes)",
			   h->block, h->seek_size);
	if (h->comp < BFS_COMP_NONE || h->comp > BFS_COMP_ZLIB)
		return BAD("invalid compression %" PRIu32, h->comp);
	if ((k->comp != BFS_COMP_AUTO && h->comp != k->comp) || h->file_size != k->file_size ||
	    h->mtime_ns != k->mtime_ns || h->pathlen != strlen(k->path))
		return BFS_INDEX_ABSENT; /* made for another version of the shard */
	if (!layout_of(h, l) || h->nrecords > UINT64_MAX - BFS_INDEX_BLOCK ||
	    h->nblocks != (h->nrecords + BFS_INDEX_BLOCK) / BFS_INDEX_BLOCK ||
	    h->deltas_bytes < PAD || h->max_len > BFS_RECORD_MAX_LEN)
		return BAD("invalid header counts");
	if (l->total != size)
		return BAD("%s (%" PRIu64 " bytes, the header says %" PRIu64 ")",
			   size < l->total ? "truncated" : "wrong size", size, l->total);
	return BFS_INDEX_LOADED;
}

/* Everything after the header: path, CRC, directory, seek points. p holds
 * the whole file (size bytes), 16-byte aligned. Fills ix's read side. */
static enum bfs_index_load_result check_body(struct bfs_index *ix, const uint8_t *p, uint64_t size,
					     const struct bfs_index_key *k, char *why,
					     size_t whycap)
{
	struct bfs_index_hdr h;
	struct layout l;
	enum bfs_index_load_result r;
	const struct bfs_index_entry *dir;
	const struct bfs_seek_point *pts;
	uint64_t prev = 0;

	memcpy(&h, p, sizeof(h) < size ? sizeof(h) : (size_t)size);
	if (size < sizeof(h))
		memset((uint8_t *)&h + size, 0, sizeof(h) - (size_t)size);
	r = check_hdr(&h, size, k, &l, why, whycap);
	if (r != BFS_INDEX_LOADED)
		return r;
	if (bfs_crc32c(0, p + HDR_BYTES, (size_t)(size - HDR_BYTES)) != h.body_crc)
		return BAD("corrupt (checksum mismatch)");
	if (memcmp(p + HDR_BYTES, k->path, h.pathlen) != 0)
		return BFS_INDEX_ABSENT; /* another shard whose path hashes the same */
	dir = (const struct bfs_index_entry *)(const void *)(p + l.dir);
	for (uint64_t b = 0; b < h.nblocks; b++) {
		uint64_t cnt =
			b + 1 < h.nblocks ? BFS_INDEX_BLOCK : h.nrecords + 1 - b * BFS_INDEX_BLOCK;
		uint64_t m = dir[b].meta, w = (m >> 40) & 15, pos = m & POS_MASK;

		if (w > 8 || pos + (cnt - 1) * w + PAD > h.deltas_bytes || dir[b].base < prev)
			return BAD("invalid directory entry %" PRIu64, b);
		prev = dir[b].base;
	}
	pts = (const struct bfs_seek_point *)(const void *)(p + l.pts);
	for (uint64_t i = 0; i < h.nseek; i++) {
		if (pts[i].bits > 7 || pts[i].new_member > 1 || pts[i].in_off > k->file_size ||
		    (pts[i].bits && pts[i].in_off == 0) ||
		    (i && pts[i].out_off <= pts[i - 1].out_off))
			return BAD("invalid seek point %" PRIu64, i);
	}
	ix->dir = dir;
	ix->deltas = p + l.deltas;
	ix->n = h.nrecords;
	ix->max_len = h.max_len;
	ix->pts = h.nseek ? pts : NULL;
	ix->npts = (size_t)h.nseek;
	ix->deltas_bytes = h.deltas_bytes;
	ix->comp = h.comp;
	ix->data_bytes = h.nblocks * 16 + h.deltas_bytes + h.nseek * sizeof(*pts);
	if (bfs_index_offset(ix, ix->n) != h.end_offset ||
	    (h.comp == BFS_COMP_NONE && h.end_offset > k->file_size))
		return BAD("end offset %" PRIu64 " does not match the directory", h.end_offset);
	return BFS_INDEX_LOADED;
}

static ssize_t pread_all(int fd, void *buf, size_t n, off_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -1 : (ssize_t)got;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

enum bfs_index_load_result bfs_index_load(struct bfs_index **out, const char *path,
					  const struct bfs_index_key *k, char *why, size_t whycap)
{
	struct bfs_index_hdr h;
	struct bfs_index *ix = NULL;
	struct layout l;
	struct stat st;
	enum bfs_index_load_result r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return BFS_INDEX_ABSENT;
	memset(&h, 0, sizeof(h));
	/* a short file leaves the rest of h zero: check_hdr says truncated */
	if (fstat(fd, &st) != 0 || pread_all(fd, &h, sizeof(h), 0) < 0) {
		close(fd);
		return BFS_INDEX_ABSENT;
	}
	/* a stale or foreign entry is told by its header alone */
	r = check_hdr(&h, (uint64_t)st.st_size, k, &l, why, whycap);
	if (r != BFS_INDEX_LOADED || (size_t)st.st_size > SIZE_MAX)
		goto out;
	ix = calloc(1, sizeof(*ix));
	if (!ix) {
		r = BFS_INDEX_ABSENT;
		goto out;
	}
	if (st.st_size >= MAP_MIN) {
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED) {
			ix->map = m;
			ix->map_len = (size_t)st.st_size;
		}
	}
	if (!ix->map) {
		ix->mem = malloc((size_t)st.st_size);
		if (!ix->mem ||
		    pread_all(fd, ix->mem, (size_t)st.st_size, 0) != (ssize_t)st.st_size) {
			r = BFS_INDEX_ABSENT;
			goto out;
		}
	}
	r = check_body(ix, ix->map ? ix->map : ix->mem, (uint64_t)st.st_size, k, why, whycap);
out:
	close(fd);
	if (r == BFS_INDEX_LOADED) {
		*out = ix;
	} else {
		bfs_index_free(ix);
	}
	return r;
}

enum bfs_index_load_result bfs_index_from_bytes(struct bfs_index **out, const uint8_t *p,
						size_t len, const struct bfs_index_key *k,
						char *why, size_t whycap)
{
	struct bfs_index *ix = calloc(1, sizeof(*ix));
	enum bfs_index_load_result r;

	if (!ix || !(ix->mem = malloc(len ? len : 1))) {
		free(ix);
		return BFS_INDEX_ABSENT;
	}
	memcpy(ix->mem, p, len);
	r = check_body(ix, ix->mem, len, k, why, whycap);
	if (r == BFS_INDEX_LOADED)
		*out = ix;
	else
		bfs_index_free(ix);
	return r;
}
