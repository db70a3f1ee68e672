/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_s3list.c — fuzz target for decoder/cloud/s3xml.c: the bytes are what an
 * object store answered to ListObjectsV2 (or to anything, as an error
 * document). Untrusted: any server the endpoint names writes them. A page
 * that parses must hold only sane objects: non-empty keys of at most
 * BFS_S3XML_MAX_KEY bytes with no NUL, ETags that fit If-Match, and a
 * continuation token whenever it says it is truncated. Parsing it again,
 * onto the objects already gathered, must append the same number. An
 * error document that parses has a Code. The same bytes as an STS answer
 * (AssumeRole, AssumeRoleWithWebIdentity: credentials for a role, from an
 * endpoint AWS_ENDPOINT_URL_STS may name): one that parses is an error with
 * a Code, or credentials with all four fields; a refusal leaves nothing
 * allocated and says why.
 */
#include "s3xml.h"

#include <stdlib.h>
#include <string.h>

int bfs_fuzz_s3list(const uint8_t *data, size_t size);

static void check_page(const struct bfs_s3xml_list *l, size_t from)
{
	for (size_t i = from; i < l->n; i++) {
		size_t k = strlen(l->objs[i].key);

		if (k == 0 || k > BFS_S3XML_MAX_KEY || !l->objs[i].etag ||
		    strlen(l->objs[i].etag) >= BFS_S3_ETAG_MAX)
			abort();
	}
	if (l->truncated && (!l->next_token || !*l->next_token))
		abort();
	if (!l->truncated && l->next_token)
		abort();
}

int bfs_fuzz_s3list(const uint8_t *data, size_t size)
{
	struct bfs_s3xml_list l = { 0 };
	struct bfs_s3xml_error e;
	char why[256];
	char *copy;

	if (bfs_s3xml_parse_list(&l, (const char *)data, size, why, sizeof(why)) == 0) {
		size_t first = l.n;

		check_page(&l, 0);
		if (bfs_s3xml_parse_list(&l, (const char *)data, size, why, sizeof(why)) != 0 ||
		    l.n != 2 * first)
			abort();
		check_page(&l, first);
	} else if (!why[0]) {
		abort(); /* a refusal always says why */
	}
	bfs_s3xml_list_destroy(&l);
	if (bfs_s3xml_parse_error(&e, (const char *)data, size) == 0 && !e.code[0])
		abort();
	{
		struct bfs_s3xml_sts x;

		why[0] = '\0';
		if (bfs_s3xml_parse_sts(&x, (const char *)data, size, why, sizeof(why)) == 0) {
			if (x.is_error ? !x.code[0] || x.key_id
				       : !x.key_id || !*x.key_id || !x.secret || !*x.secret ||
						 !x.token || !*x.token || !x.expiration)
				abort();
			bfs_s3xml_sts_destroy(&x);
		} else if (!why[0] || x.key_id || x.secret || x.token || x.arn) {
			abort();
		}
	}
	copy = malloc(size + 1);
	if (copy) {
		memcpy(copy, data, size);
		copy[size] = '\0';
		if (bfs_s3xml_url_decode(copy) && strlen(copy) > size)
			abort();
		free(copy);
	}
	return 0;
}

#ifdef BFS_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return bfs_fuzz_s3list(data, size);
}
#endif
