/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_record.c — fuzz target for record.c: the bytes become a shard in a
 * memfd, which is opened with compression detection, scanned with CRC checks,
 * and every indexed record is read back and compared with what the scan saw.
 * A second pass forces plain framing without CRC checks, so hostile lengths
 * reach the framing code.
 *
 * bfs_fuzz_record() is called by fuzz_replay.c (plain main, every make check)
 * and, built with -DBFS_LIBFUZZER, by libFuzzer's LLVMFuzzerTestOneInput.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fuzz_memfd.h"
#include "crc32c.h"
#include "decodertest.h"
#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int bfs_fuzz_record(const uint8_t *data, size_t size);

#define MAX_TRACKED 65536

struct seen {
	uint32_t crc[MAX_TRACKED];
	uint64_t n;
};

static int remember(void *ctx, uint64_t index, uint64_t offset, const uint8_t *data, uint32_t len)
{
	struct seen *sn = ctx;

	(void)offset;
	if (index != sn->n)
		abort();
	if (index < MAX_TRACKED)
		sn->crc[index] = bfs_crc32c(0, data, len);
	sn->n++;
	return 0;
}

static void one_pass(const char *path, enum bfs_compression comp, bool verify, struct seen *sn)
{
	struct bfs_shard *s = NULL;
	uint8_t *buf = NULL;
	size_t cap = 0;

	if (bfs_shard_open(&s, path, comp) != 0)
		return;
	sn->n = 0;
	bfs_shard_scan(s, verify, remember, sn);
	if (bfs_shard_nrecords(s) != sn->n)
		abort(); /* the index holds exactly the records yielded */
	for (uint64_t i = 0; i < bfs_shard_nrecords(s); i++) {
		uint32_t len = bfs_shard_record_len(s, i);

		if (len > cap) {
			free(buf);
			cap = len;
			buf = malloc(cap);
			if (!buf)
				break;
		}
		if (bfs_shard_read(s, i, buf, cap, verify) != 0)
			abort(); /* a record the scan accepted must read back */
		if (i < MAX_TRACKED && bfs_crc32c(0, buf, len) != sn->crc[i])
			abort(); /* and read back the same bytes */
	}
	free(buf);
	bfs_shard_close(s);
}

int bfs_fuzz_record(const uint8_t *data, size_t size)
{
	static struct seen sn;
	char path[64];
	int fd;

	fd = bfs_fuzz_memfd("bfs_fuzz_record", data, size, path, sizeof(path));
	if (fd < 0)
		return 0;
	one_pass(path, BFS_COMP_AUTO, true, &sn);
	one_pass(path, BFS_COMP_NONE, false, &sn);
	close(fd);
	return 0;
}

#ifdef BFS_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return bfs_fuzz_record(data, size);
}
#endif
