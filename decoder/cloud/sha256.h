/*
 * sha256.h — SHA-256 and HMAC-SHA256, for the object-store request signer
 * (s3sign.c). sha256.c is the one file that includes OpenSSL's libcrypto.
 *
 * Does not: keep state between calls, or know anything of HTTP or S3.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef BFS_SHA256_H
#define BFS_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define BFS_SHA256_LEN 32

/* out = SHA-256(p[0..n)). */
void bfs_sha256_digest(uint8_t out[BFS_SHA256_LEN], const void *p, size_t n);
/* out = HMAC-SHA256(key[0..klen), p[0..n)). */
void bfs_sha256_hmac(uint8_t out[BFS_SHA256_LEN], const void *key, size_t klen, const void *p,
		     size_t n);
/* The 64 lower-case hex digits of a digest, and a terminating NUL. */
void bfs_sha256_hex(char dst[2 * BFS_SHA256_LEN + 1], const uint8_t d[BFS_SHA256_LEN]);

#endif
