/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sha256.h — SHA-256 and HMAC-SHA256, for the object-store request signer
 * (s3sign.c), and RS256 (RSA PKCS#1 v1.5 over SHA-256), for the JWT that
 * Google's service-account keys sign (credgcp.c). sha256.c is the one file
 * that includes OpenSSL's libcrypto.
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

/* RS256: *sig (malloc'd, *siglen bytes) = the RSASSA-PKCS1-v1_5 SHA-256
 * signature of p[0..n) with the RSA private key pem[0..pemlen) (PEM:
 * PKCS#8 "PRIVATE KEY", as Google's key files hold it, or PKCS#1 "RSA
 * PRIVATE KEY"; never one with a passphrase: nothing is prompted). 0;
 * -EINVAL when pem holds no unencrypted RSA private key; -ENOMEM. Sets no
 * message (the caller names the file); libcrypto's error queue is cleared,
 * and the key's copies in libcrypto's memory are freed by it. */
int bfs_rs256_sign(uint8_t **sig, size_t *siglen, const char *pem, size_t pemlen, const void *p,
		   size_t n);

#endif
