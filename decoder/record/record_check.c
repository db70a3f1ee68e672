/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record_check.c — the checks every read of a record makes, whoever reads
 * it (record_read.c from a file or the I/O stage, record_z.c from a
 * compressed stream): its frame against the index and both CRCs, and the
 * message of a record that failed a batched read (record_impl.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "record_impl.h"

#include <inttypes.h>
#include <stdio.h>

static int check_header(uint64_t i, const struct bfs_record_loc *loc, const uint8_t *hdr,
			bool verify)
{
	uint64_t len = bfs_get_le64(hdr);
	uint32_t stored, calc;

	if (verify && !frame_crc_ok(hdr, 8, hdr + 8, &stored, &calc))
		return bfs_err_set(-EBADMSG,
				   "record %" PRIu64 " at offset %" PRIu64
				   ": length CRC mismatch (stored 0x%08" PRIx32
				   ", computed 0x%08" PRIx32 ")",
				   i, loc->offset, stored, calc);
	if (len != loc->len)
		return bfs_err_set(-EBADMSG,
				   "record %" PRIu64 " at offset %" PRIu64 ": length %" PRIu64
				   " differs from the index (%" PRIu32 "); file changed?",
				   i, loc->offset, len, loc->len);
	return 0;
}

static int check_data(uint64_t i, const struct bfs_record_loc *loc, const uint8_t *data,
		      const uint8_t *foot)
{
	uint32_t stored, calc;

	if (!frame_crc_ok(data, loc->len, foot, &stored, &calc))
		return bfs_err_set(-EBADMSG,
				   "record %" PRIu64 " at offset %" PRIu64
				   ": data CRC mismatch (stored 0x%08" PRIx32
				   ", computed 0x%08" PRIx32 ")",
				   i, loc->offset, stored, calc);
	return 0;
}

int bfs_record_check_frame(uint64_t i, const struct bfs_record_loc *loc, const uint8_t *hdr,
			   const uint8_t *data, const uint8_t *foot, bool verify)
{
	int err = hdr ? check_header(i, loc, hdr, verify) : 0;

	if (!err && verify && foot)
		err = check_data(i, loc, data, foot);
	return err;
}

void bfs_shard_fail_one(const struct bfs_shard *s, int err, int *errs, char **msgs, size_t k)
{
	errs[k] = err;
	if (asprintf(&msgs[k], "%s: %s", s->path, bfs_err_msg()) < 0)
		msgs[k] = NULL;
}
