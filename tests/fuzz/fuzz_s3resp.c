/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_s3resp.c — fuzz target for decoder/cloud/s3resp.c, the object-store
 * client's handling of one HTTP response (what curl hands it: header lines,
 * then body pieces), and of the message made of it.
 *
 * The input: byte 0 picks the kind (GET, HEAD, LIST, PROBE), whether the
 * read may stop at the object's end, how the transport ended and the size
 * of the body pieces; bytes 1-4 the read's offset, 5-6 its length
 * (1..65536); then the response: header lines up to an empty line, and the
 * body. The response must never write past the range, a good ranged read
 * must hold exactly the bytes asked for (or, allowed to stop at the end,
 * no more), a verdict that is not OK must say why, and the message, once
 * cleaned, must be one line holding neither the secret nor the token,
 * even when the store echoes them.
 */
#include "s3_impl.h"

#include <stdlib.h>
#include <string.h>

int bfs_fuzz_s3resp(const uint8_t *data, size_t size);

#define SECRET "fuzz-SECRET-0123456789"
#define TOKEN "fuzz-TOKEN-abcdefghij"

int bfs_fuzz_s3resp(const uint8_t *data, size_t size)
{
	struct bfs_s3_config cfg;
	struct bfs_s3resp r = { 0 };
	const uint8_t *p, *end = data + size;
	char why[1024], msg[1100];
	uint8_t *dst;
	size_t piece;
	int err = 0;
	enum bfs_s3resp_verdict v;

	if (size < 7)
		return 0;
	bfs_s3_config_init(&cfg);
	cfg.endpoint = "http://127.0.0.1:1";
	cfg.region = "us-east-1";
	cfg.source = "fuzz";
	cfg.secret = SECRET;
	cfg.session_token = TOKEN;
	r.kind = (enum bfs_s3resp_kind)(data[0] & 3);
	r.to_end = data[0] & 4;
	r.off = (uint64_t)data[1] | (uint64_t)data[2] << 8 | (uint64_t)data[3] << 16 |
		(uint64_t)data[4] << 24;
	r.len = (size_t)(data[5] | data[6] << 8) + 1;
	r.if_match = (data[0] & 8) ? "\"etag\"" : NULL;
	piece = (size_t)(data[0] >> 6) * 300 + 1;
	dst = malloc(r.len + 16);
	if (!dst)
		return 0;
	memset(dst + r.len, 0xa5, 16);
	r.dst = dst;
	bfs_s3resp_reset(&r);
	/* header lines, each with its line end, until an empty one */
	for (p = data + 7; p < end;) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);

		bfs_s3resp_header(&r, (const char *)p, n);
		p += n;
		if (n <= 2 && (n == 1 || p[-2] == '\r'))
			break;
	}
	while (p < end) {
		size_t n = (size_t)(end - p) < piece ? (size_t)(end - p) : piece;

		if (bfs_s3resp_body(&r, p, n) != n)
			break;
		p += n;
	}
	for (int i = 0; i < 16; i++)
		if (dst[r.len + i] != 0xa5)
			abort();
	if (r.got > r.len)
		abort();
	v = bfs_s3resp_judge(&r, (enum bfs_s3resp_net)((data[0] >> 4) % 3), data[0] & 0x20,
			     "a transport error", &cfg, &err, why, sizeof(why));
	if (v == BFS_S3RESP_OK && r.kind == BFS_S3RESP_GET && r.got != r.len && !r.to_end)
		abort();
	if (v != BFS_S3RESP_OK && (!why[0] || err >= 0))
		abort();
	snprintf(msg, sizeof(msg), "s3://b/k bytes 0-1: %s", why);
	bfs_s3_msg_clean(msg, sizeof(msg), &cfg);
	if (strstr(msg, SECRET) || strstr(msg, TOKEN))
		abort();
	for (const char *c = msg; *c; c++)
		if ((unsigned char)*c < 0x20)
			abort();
	bfs_s3_str_free(&r.body);
	free(dst);
	return 0;
}

#ifdef BFS_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return bfs_fuzz_s3resp(data, size);
}
#endif
