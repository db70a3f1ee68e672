/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3xml.h — the XML an object store answers with: a ListObjectsV2 page
 * (ListBucketResult) and an error (<Error><Code>...<Message>...); and the
 * XML of AWS STS (AssumeRole, AssumeRoleWithWebIdentity). s3xml.c
 * is the one file that includes expat. The bytes are untrusted: documents
 * with a DOCTYPE (hence entity declarations) are refused, nesting, text
 * lengths and key lengths are capped, numbers are checked.
 *
 * Does not: fetch anything, or know how the answer arrived.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef BFS_S3XML_H
#define BFS_S3XML_H

#include "s3obj.h"

#include <stdbool.h>
#include <stddef.h>

/* Caps on what a document may hold. */
#define BFS_S3XML_MAX_KEY 4096 /* bytes of a key, after decoding (S3: 1024) */
#define BFS_S3XML_MAX_TEXT 16384 /* bytes of any one element's text we keep */
#define BFS_S3XML_MAX_DEPTH 16

/* Objects gathered over the pages of one listing. */
struct bfs_s3xml_list {
	struct bfs_s3_object *objs;
	size_t n, cap;
	/* of the page last parsed */
	bool truncated; /* IsTruncated */
	char *next_token; /* NextContinuationToken, malloc'd; NULL when none */
	size_t page_keys; /* Contents in that page */
};

/* Parse one ListBucketResult page: append its objects (keys decoded when
 * EncodingType is url) to l and set its page fields. 0, -ENOMEM, or
 * -EBADMSG with a message in why (not XML, another root element, a
 * Contents without Key or Size, a bad number, IsTruncated true without a
 * token, a key that decodes to a NUL, over a cap). On an error, objects of
 * that page may have been appended; free l with bfs_s3xml_list_destroy. */
int bfs_s3xml_parse_list(struct bfs_s3xml_list *l, const char *xml, size_t len, char *why,
			 size_t whycap);
void bfs_s3xml_list_destroy(struct bfs_s3xml_list *l);

/* An error document's fields, each truncated to fit, "" when absent. */
struct bfs_s3xml_error {
	char code[64];
	char message[256];
	char region[64]; /* the bucket's region (AuthorizationHeaderMalformed) */
	char endpoint[256]; /* where the bucket is (PermanentRedirect) */
};

/* 0 when xml is an <Error> document with a Code; -EBADMSG otherwise
 * (another root, not XML, an HTML page from a proxy); -ENOMEM. */
int bfs_s3xml_parse_error(struct bfs_s3xml_error *e, const char *xml, size_t len);

/* An STS answer (AssumeRole, AssumeRoleWithWebIdentity) or its error
 * (<ErrorResponse><Error><Code>). Strings malloc'd; the secret and the
 * token are wiped by bfs_s3xml_sts_destroy. */
struct bfs_s3xml_sts {
	bool is_error; /* an ErrorResponse: code and message are set, nothing else */
	char code[64], message[256];
	char *key_id, *secret, *token; /* Credentials: AccessKeyId, SecretAccessKey, SessionToken */
	char *expiration; /* Credentials/Expiration as sent (ISO 8601) */
	char *arn; /* AssumedRoleUser/Arn, NULL when absent */
};

/* Parse an STS answer. 0 with o filled (an error document, or one whose
 * Credentials have all four fields); -EBADMSG with why (another root, not
 * XML, a field missing or given twice, over a cap); -ENOMEM. On an error o
 * is left empty. */
int bfs_s3xml_parse_sts(struct bfs_s3xml_sts *o, const char *xml, size_t len, char *why,
			size_t whycap);
void bfs_s3xml_sts_destroy(struct bfs_s3xml_sts *o); /* accepts a zeroed one */

/* Decode an S3 "url" encoded string (%XX and '+' for a space) in place.
 * false when it holds a bad escape or decodes to a NUL. */
bool bfs_s3xml_url_decode(char *s);

#endif
