/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cjson.h — the little JSON that the cloud credentials read and write:
 * a bounded buffer parsed as one object (IMDS and container replies,
 * credential_process output, Google's key files and token replies), its
 * string and number members, and the compact text of a small flat object
 * (a JWT's header and claims). cjson.c is the cloud unit's one file that
 * includes jansson (the decoder's schema JSON is schema_json.c's).
 *
 * Secrets: a parsed object holds the document's strings; bfs_cjson_wipe
 * zeroes one of them in place before bfs_cjson_free (the allocator does
 * not). Error lines carry a line and column, never the document's text.
 *
 * Does not: keep state between calls, walk arrays or nested objects.
 *
 * Thread-safety: every function may be called from any thread; one object
 * is used by one thread at a time.
 */
#ifndef BFS_CJSON_H
#define BFS_CJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A parsed JSON object; owns every string read from it. */
struct bfs_cjson;

/* bfs_cjson_parse flags: a key given twice is an error (not the last one wins). */
#define BFS_CJSON_NO_DUPLICATES 1u

/* Parse text[0..n) (no NUL needed) as one JSON object into *out (free with
 * bfs_cjson_free). 0; -EBADMSG "WHAT: not JSON (line L, column C)" in why
 * (a string holding \u0000 too), or "WHAT: not a JSON object"; -ENOMEM
 * "out of memory". what names the document for the line (a file's path,
 * "the token reply"). */
int bfs_cjson_parse(struct bfs_cjson **out, const char *text, size_t n, unsigned flags,
		    const char *what, char *why, size_t cap);
/* Frees o (NULL is fine). */
void bfs_cjson_free(struct bfs_cjson *o);

/* True when member key is present and not null. */
bool bfs_cjson_has(const struct bfs_cjson *o, const char *key);
/* Member key's string (owned by o, valid until bfs_cjson_free), or NULL
 * when it is absent or not a string; *len (when len is not NULL) its
 * length (strlen: a document with a \u0000 in a string is not parsed). */
const char *bfs_cjson_str(const struct bfs_cjson *o, const char *key, size_t *len);
/* Zero member key's string in place (a secret), when it is one. */
void bfs_cjson_wipe(struct bfs_cjson *o, const char *key);
/* *v = member key when it is a JSON integer: 0; -ENOENT when it is absent
 * or null; -EINVAL when it is another type. */
int bfs_cjson_int(const struct bfs_cjson *o, const char *key, int64_t *v);
/* As bfs_cjson_int, a real number too (truncated toward zero, clamped to
 * int64_t's range). */
int bfs_cjson_number(const struct bfs_cjson *o, const char *key, int64_t *v);

/* One member of an object to write: a string, or (str NULL) an integer. */
struct bfs_cjson_member {
	const char *key;
	const char *str;
	int64_t num;
};

/* *out (malloc'd, NUL-terminated) = the compact JSON text of the object of
 * the n members m, in their order. 0; -EINVAL when a key or string is not
 * UTF-8 (jansson answers a failed allocation of one the same way); -ENOMEM.
 * Sets no message. */
int bfs_cjson_object_text(char **out, const struct bfs_cjson_member *m, size_t n);

#endif
