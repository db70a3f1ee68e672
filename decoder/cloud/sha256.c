/* SPDX-License-Identifier: Apache-2.0 */
/* sha256.c — SHA-256, HMAC-SHA256 and RS256 through libcrypto (the one file
 * that includes it). */
#include "sha256.h"

#include <errno.h>
#include <limits.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
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

/* A passphrase callback that gives none: an encrypted key fails to load
 * instead of prompting on the terminal. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

int bfs_rs256_sign(uint8_t **sig, size_t *siglen, const char *pem, size_t pemlen, const void *p,
		   size_t n)
{
	EVP_PKEY *key = NULL;
	EVP_MD_CTX *md = NULL;
	BIO *bio = NULL;
	uint8_t *out = NULL;
	size_t len = 0;
	int rc = -EINVAL;

	*sig = NULL;
	*siglen = 0;
	if (pemlen > (size_t)INT_MAX)
		goto out;
	bio = BIO_new_mem_buf(pem, (int)pemlen);
	if (!bio) {
		rc = -ENOMEM;
		goto out;
	}
	key = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL);
	if (!key || EVP_PKEY_base_id(key) != EVP_PKEY_RSA)
		goto out;
	md = EVP_MD_CTX_new();
	if (!md) {
		rc = -ENOMEM;
		goto out;
	}
	if (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(md, NULL, &len, p, n) != 1 || len == 0)
		goto out;
	out = malloc(len);
	if (!out) {
		rc = -ENOMEM;
		goto out;
	}
	if (EVP_DigestSign(md, out, &len, p, n) != 1) {
		free(out);
		out = NULL;
		goto out;
	}
	*sig = out;
	*siglen = len;
	rc = 0;
out:
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(key);
	BIO_free(bio);
	ERR_clear_error();
	return rc;
}
