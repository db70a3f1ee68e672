/* sha256.c — SHA-256 and HMAC-SHA256 through libcrypto (the one file that
 * includes it). */
#include "sha256.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>

void bfs_sha256_digest(uint8_t out[BFS_SHA256_LEN], const void *p, size_t n)
{
	unsigned int len = BFS_SHA256_LEN;

	/* fails only when libcrypto cannot allocate: nothing sensible to sign */
	if (!EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) || len != BFS_SHA256_LEN)
		abort();
}

void bfs_sha256_hmac(uint8_t out[BFS_SHA256_LEN], const void *key, size_t klen, const void *p,
		     size_t n)
{
	unsigned int len = BFS_SHA256_LEN;

	if (klen > (size_t)INT32_MAX || !HMAC(EVP_sha256(), key, (int)klen, p, n, out, &len) ||
	    len != BFS_SHA256_LEN)
		abort();
}

void bfs_sha256_hex(char dst[2 * BFS_SHA256_LEN + 1], const uint8_t d[BFS_SHA256_LEN])
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < BFS_SHA256_LEN; i++) {
		dst[2 * i] = hex[d[i] >> 4];
		dst[2 * i + 1] = hex[d[i] & 15];
	}
	dst[2 * BFS_SHA256_LEN] = '\0';
}
