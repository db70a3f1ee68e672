/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for Google's Application Default Credentials (credgcp.h): the
 * JWT a service-account key signs (its signature verified here with the
 * key's public half, straight through libcrypto, not through the code under
 * test), base64url, the key files and their errors, the chain's order, the
 * token requests and replies.
 *
 * Each test runs in a forked process (check's default), so the environment
 * variables one sets do not reach another. */
#include "common.h"
#include "credgcp.h"

#include <check.h>
#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/* The test's folder goes when its process ends. */
static void rm_dir(void)
{
	if (dir[0])
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void clean_env(void)
{
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("CLOUDSDK_CONFIG");
	unsetenv("GCE_METADATA_HOST");
	unsetenv("GCE_METADATA_ROOT");
	snprintf(dir, sizeof(dir), "/tmp/bfs-credgcp-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	atexit(rm_dir);
	setenv("HOME", dir, 1);
}

static void put(const char *rel, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* A fresh RSA key: *pem its PKCS#8 PEM (malloc'd), the key itself returned. */
static EVP_PKEY *new_key(char **pem)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_RSA, NULL);
	EVP_PKEY *key = NULL;
	BIO *b = BIO_new(BIO_s_mem());
	char *p;
	long n;

	ck_assert_ptr_nonnull(ctx);
	ck_assert_int_eq(EVP_PKEY_keygen_init(ctx), 1);
	ck_assert_int_eq(EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, 2048), 1);
	ck_assert_int_eq(EVP_PKEY_keygen(ctx, &key), 1);
	EVP_PKEY_CTX_free(ctx);
	ck_assert_int_eq(PEM_write_bio_PKCS8PrivateKey(b, key, NULL, NULL, 0, NULL, NULL), 1);
	n = BIO_get_mem_data(b, &p);
	*pem = strndup(p, (size_t)n);
	BIO_free(b);
	return key;
}

/* A service-account key file for pem. */
static char *sa_json(const char *pem, const char *token_uri)
{
	json_t *o =
		json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", "service_account", "project_id",
			  "p", "private_key_id", "kid123", "private_key", pem, "client_email",
			  "reader@p.iam.gserviceaccount.com", "token_uri", token_uri);
	char *s = json_dumps(o, JSON_INDENT(2));

	json_decref(o);
	return s;
}

/* base64url decode (for checking). */
static size_t unb64(uint8_t *out, const char *s, size_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	uint32_t acc = 0;
	int bits = 0;
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		const char *at = strchr(tab, s[i]);

		ck_assert_ptr_nonnull(at);
		acc = (acc << 6) | (uint32_t)(at - tab);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	return o;
}

static json_t *part_json(const char *s, size_t n)
{
	uint8_t buf[4096];
	size_t len = unb64(buf, s, n);
	json_t *j = json_loadb((const char *)buf, len, 0, NULL);

	ck_assert_ptr_nonnull(j);
	return j;
}

START_TEST(b64url_matches_rfc4648_vectors_without_padding)
{
	static const char *const in[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *const want[] = {
		"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"
	};
	const uint8_t odd[] = { 0xfb, 0xff, 0xfe };
	char *s;

	for (size_t i = 0; i < BFS_ARRAY_SIZE(in); i++) {
		ck_assert_int_eq(bfs_gcp_b64url(&s, in[i], strlen(in[i])), 0);
		ck_assert_str_eq(s, want[i]);
		free(s);
	}
	ck_assert_int_eq(bfs_gcp_b64url(&s, odd, 3), 0);
	ck_assert_str_eq(s, "-__-"); /* base64 "+//+": the url alphabet */
	free(s);
}
END_TEST

START_TEST(the_jwt_is_signed_rs256_with_the_claims_google_checks)
{
	char *pem, *text, *jwt, path[128];
	EVP_PKEY *key;
	struct bfs_gcp_source s;
	const char *d1, *d2;
	json_t *h, *c;
	uint8_t sig[1024];
	size_t siglen;
	EVP_MD_CTX *md;

	clean_env();
	key = new_key(&pem);
	text = sa_json(pem, "http://127.0.0.1:9/token");
	put("sa.json", text);
	snprintf(path, sizeof(path), "%s/sa.json", dir);
	ck_assert_int_eq(bfs_gcp_source_load(&s, path), 0);
	ck_assert_int_eq(s.kind, BFS_GCP_SERVICE_ACCOUNT);
	ck_assert_int_eq(bfs_gcp_jwt(&jwt, &s, BFS_GCP_SCOPE, 1700000000), 0);

	d1 = strchr(jwt, '.');
	ck_assert_ptr_nonnull(d1);
	d2 = strchr(d1 + 1, '.');
	ck_assert_ptr_nonnull(d2);
	ck_assert_ptr_null(strchr(d2 + 1, '.'));
	ck_assert_ptr_null(strchr(jwt, '=')); /* no padding */
	h = part_json(jwt, (size_t)(d1 - jwt));
	ck_assert_str_eq(json_string_value(json_object_get(h, "alg")), "RS256");
	ck_assert_str_eq(json_string_value(json_object_get(h, "typ")), "JWT");
	ck_assert_str_eq(json_string_value(json_object_get(h, "kid")), "kid123");
	c = part_json(d1 + 1, (size_t)(d2 - d1 - 1));
	ck_assert_str_eq(json_string_value(json_object_get(c, "iss")),
			 "reader@p.iam.gserviceaccount.com");
	ck_assert_str_eq(json_string_value(json_object_get(c, "scope")),
			 "https://www.googleapis.com/auth/devstorage.read_only");
	ck_assert_str_eq(json_string_value(json_object_get(c, "aud")), "http://127.0.0.1:9/token");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "iat")), 1700000000);
	ck_assert_int_eq(json_integer_value(json_object_get(c, "exp")), 1700003600);

	/* the signature, checked with the public half by libcrypto itself */
	siglen = unb64(sig, d2 + 1, strlen(d2 + 1));
	ck_assert_uint_eq(siglen, 256);
	md = EVP_MD_CTX_new();
	ck_assert_int_eq(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key), 1);
	ck_assert_int_eq(
		EVP_DigestVerify(md, sig, siglen, (const uint8_t *)jwt, (size_t)(d2 - jwt)), 1);
	/* and a changed claim does not pass */
	jwt[d1 - jwt + 3] ^= 1;
	ck_assert_int_ne(
		EVP_DigestVerify(md, sig, siglen, (const uint8_t *)jwt, (size_t)(d2 - jwt)), 1);
	EVP_MD_CTX_free(md);
	json_decref(h);
	json_decref(c);
	free(jwt);
	bfs_gcp_source_destroy(&s);
	EVP_PKEY_free(key);
	free(text);
	free(pem);
}
END_TEST

START_TEST(the_token_requests_are_the_oauth_grants)
{
	const char *user2 = "{\"type\": \"authorized_user\", \"client_id\": \"cid.apps\", "
			    "\"client_secret\": \"cs\", \"refresh_token\": \"1//r+t/x=\"}";
	struct bfs_gcp_source s;
	char *pem, *text, *url, *body;
	EVP_PKEY *key;

	clean_env();
	ck_assert_int_eq(bfs_gcp_source_parse(&s, "u.json", user2, strlen(user2)), 0);
	ck_assert_str_eq(s.token_uri, "https://oauth2.googleapis.com/token"); /* the default */
	ck_assert_int_eq(bfs_gcp_token_request(&s, 0, &url, &body), 0);
	ck_assert_str_eq(url, "https://oauth2.googleapis.com/token");
	ck_assert_str_eq(body, "grant_type=refresh_token&client_id=cid.apps&client_secret=cs&"
			       "refresh_token=1%2F%2Fr%2Bt%2Fx%3D");
	free(url);
	free(body);
	bfs_gcp_source_destroy(&s);

	key = new_key(&pem);
	text = sa_json(pem, "http://h/t");
	ck_assert_int_eq(bfs_gcp_source_parse(&s, "sa.json", text, strlen(text)), 0);
	ck_assert_int_eq(bfs_gcp_token_request(&s, 1700000000, &url, &body), 0);
	ck_assert_str_eq(url, "http://h/t");
	ck_assert_int_eq(strncmp(body,
				 "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&"
				 "assertion=ey",
				 77),
			 0);
	free(url);
	free(body);
	bfs_gcp_source_destroy(&s);

	s = (struct bfs_gcp_source){ .kind = BFS_GCP_METADATA, .metadata_host = "127.0.0.1:8" };
	ck_assert_int_eq(bfs_gcp_token_request(&s, 0, &url, &body), 0);
	ck_assert_str_eq(url, "http://127.0.0.1:8/computeMetadata/v1/instance/service-accounts/"
			      "default/token");
	ck_assert_ptr_null(body);
	free(url);
	EVP_PKEY_free(key);
	free(text);
	free(pem);
}
END_TEST

/* The message of parsing text as path "k.json" holds each of the words. */
static void parse_fails(const char *text, int err, const char *w1, const char *w2)
{
	struct bfs_gcp_source s;

	ck_assert_int_eq(bfs_gcp_source_parse(&s, "/x/k.json", text, strlen(text)), err);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "/x/k.json"));
	ck_assert_ptr_null(strchr(bfs_err_msg(), '\n'));
	if (w1 && !strstr(bfs_err_msg(), w1))
		ck_abort_msg("'%s' lacks '%s'", bfs_err_msg(), w1);
	if (w2 && !strstr(bfs_err_msg(), w2))
		ck_abort_msg("'%s' lacks '%s'", bfs_err_msg(), w2);
}

START_TEST(bad_key_files_name_the_file_and_the_field)
{
	parse_fails("{\"type\": \"service_account\", \n \"private_key\": \"SECRETPEM", -EINVAL,
		    "not JSON", "line 2");
	parse_fails("[1]", -EINVAL, "not a JSON object", NULL);
	parse_fails("{\"client_email\": \"a@b\"}", -EINVAL, "\"type\"", NULL);
	parse_fails("{\"type\": \"service_account\", \"private_key\": \"-----BEGIN x\"}", -EINVAL,
		    "\"client_email\"", NULL);
	parse_fails("{\"type\": \"service_account\", \"client_email\": \"a@b\"}", -EINVAL,
		    "\"private_key\"", NULL);
	parse_fails("{\"type\": \"service_account\", \"client_email\": \"a@b\", \"private_key\": "
		    "\"SECRETPEM\"}",
		    -EINVAL, "\"private_key\"", "not a PEM");
	parse_fails("{\"type\": \"service_account\", \"client_email\": 7, \"private_key\": "
		    "\"-----BEGIN \"}",
		    -EINVAL, "\"client_email\"", "not a string");
	parse_fails("{\"type\": \"authorized_user\", \"client_id\": \"c\", \"client_secret\": "
		    "\"SECRETCS\"}",
		    -EINVAL, "\"refresh_token\"", NULL);
	parse_fails("{\"type\": \"authorized_user\", \"client_id\": \"c\", \"client_secret\": "
		    "\"SECRETCS\", \"refresh_token\": \"SECRETRT\", \"token_uri\": \"ftp://x\"}",
		    -EINVAL, "\"token_uri\"", NULL);
	parse_fails("{\"type\": \"external_account\", \"audience\": \"//iam\"}", -EINVAL,
		    "external_account", "not supported");
	parse_fails("{\"type\": \"impersonated_service_account\"}", -EINVAL,
		    "impersonated_service_account", "not supported");
	parse_fails("{\"type\": \"martian\"}", -EINVAL, "martian", "unknown");
	/* no secret of the file is quoted */
	ck_assert_ptr_null(strstr(bfs_err_msg(), "SECRET"));
}
END_TEST

START_TEST(a_key_that_libcrypto_cannot_load_is_named)
{
	struct bfs_gcp_source s;
	const char *t = "{\"type\": \"service_account\", \"client_email\": \"a@b\", "
			"\"private_key\": \"-----BEGIN PRIVATE KEY-----\\nAAAASECRET\\n-----END "
			"PRIVATE KEY-----\\n\"}";
	char *jwt = NULL;

	ck_assert_int_eq(bfs_gcp_source_parse(&s, "/x/k.json", t, strlen(t)), 0);
	ck_assert_int_eq(bfs_gcp_jwt(&jwt, &s, BFS_GCP_SCOPE, 1), -EINVAL);
	ck_assert_ptr_null(jwt);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "/x/k.json"));
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "\"private_key\""));
	ck_assert_ptr_null(strstr(bfs_err_msg(), "SECRET"));
	bfs_gcp_source_destroy(&s);
}
END_TEST

static const char *user_json = "{\"type\": \"authorized_user\", \"client_id\": \"c\", "
			       "\"client_secret\": \"s\", \"refresh_token\": \"r\"}";

START_TEST(the_chain_is_google_application_credentials_then_gcloud_then_metadata)
{
	struct bfs_gcp_source s;
	char *pem, *text, path[256], looked[1024];
	EVP_PKEY *key;

	clean_env();
	/* nothing: the metadata server, and the places looked in */
	ck_assert_int_eq(bfs_gcp_adc_find(&s, looked, sizeof(looked)), 0);
	ck_assert_int_eq(s.kind, BFS_GCP_METADATA);
	ck_assert_str_eq(s.metadata_host, "metadata.google.internal");
	ck_assert_ptr_nonnull(strstr(looked, "GOOGLE_APPLICATION_CREDENTIALS"));
	ck_assert_ptr_nonnull(
		strstr(looked, "/.config/gcloud/application_default_credentials.json"));
	bfs_gcp_source_destroy(&s);
	setenv("GCE_METADATA_ROOT", "127.0.0.1:4", 1); /* the older name */
	ck_assert_int_eq(bfs_gcp_adc_find(&s, looked, sizeof(looked)), 0);
	ck_assert_str_eq(s.metadata_host, "127.0.0.1:4");
	bfs_gcp_source_destroy(&s);
	setenv("GCE_METADATA_HOST", "127.0.0.1:5", 1); /* over it */
	ck_assert_int_eq(bfs_gcp_adc_find(&s, looked, sizeof(looked)), 0);
	ck_assert_str_eq(s.metadata_host, "127.0.0.1:5");
	bfs_gcp_source_destroy(&s);

	/* the gcloud file comes before the metadata server */
	snprintf(path, sizeof(path), "%s/.config", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/.config/gcloud", dir);
	mkdir(path, 0700);
	put(".config/gcloud/application_default_credentials.json", user_json);
	ck_assert_int_eq(bfs_gcp_adc_find(&s, looked, sizeof(looked)), 0);
	ck_assert_int_eq(s.kind, BFS_GCP_AUTHORIZED_USER);
	ck_assert_str_eq(s.via, "the gcloud ADC file");
	bfs_gcp_source_destroy(&s);
	/* CLOUDSDK_CONFIG moves it: an empty folder there, the metadata server */
	snprintf(path, sizeof(path), "%s/other", dir);
	mkdir(path, 0700);
	setenv("CLOUDSDK_CONFIG", path, 1);
	ck_assert_int_eq(bfs_gcp_adc_find(&s, looked, sizeof(looked)), 0);
	ck_assert_int_eq(s.kind, BFS_GCP_METADATA);
	ck_assert_ptr_nonnull(strstr(looked, "/other/application_default_credentials.json"));
	bfs_gcp_source_destroy(&s);
	put("other/application_default_credentials.json", "{\"type\": \"external_account\"}");
	ck_assert_int_eq(bfs_gcp_adc_find(&s, looked, sizeof(looked)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "not supported"));
	unsetenv("CLOUDSDK_CONFIG");

	/* GOOGLE_APPLICATION_CREDENTIALS comes first */
	key = new_key(&pem);
	text = sa_json(pem, "http://h/t");
	put("sa.json", text);
	snprintf(path, sizeof(path), "%s/sa.json", dir);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	ck_assert_int_eq(bfs_gcp_adc_find(&s, looked, sizeof(looked)), 0);
	ck_assert_int_eq(s.kind, BFS_GCP_SERVICE_ACCOUNT);
	ck_assert_str_eq(s.via, "GOOGLE_APPLICATION_CREDENTIALS");
	ck_assert_str_eq(s.path, path);
	bfs_gcp_source_describe(&s, looked, sizeof(looked));
	ck_assert_ptr_nonnull(strstr(looked, "reader@p.iam.gserviceaccount.com"));
	ck_assert_ptr_null(strstr(looked, "PRIVATE"));
	bfs_gcp_source_destroy(&s);
	/* naming a file that is not there is an error, not a step onwards */
	snprintf(path, sizeof(path), "%s/nosuch.json", dir);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	ck_assert_int_eq(bfs_gcp_adc_find(&s, looked, sizeof(looked)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "GOOGLE_APPLICATION_CREDENTIALS"));
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "nosuch.json"));
	EVP_PKEY_free(key);
	free(text);
	free(pem);
}
END_TEST

START_TEST(token_replies_are_parsed_and_errors_quote_no_secret)
{
	char *tok, why[256];
	int64_t exp;
	const char *ok = "{\"access_token\": \"ya29.abc\", \"expires_in\": 3599, \"token_type\": "
			 "\"Bearer\"}";
	const char *bad = "{\"error\": \"invalid_grant\", \"error_description\": \"Invalid JWT "
			  "Signature.\", \"assertion\": \"SECRETJWT\"}";

	ck_assert_int_eq(bfs_gcp_token_parse(ok, strlen(ok), &tok, &exp, why, sizeof(why)), 0);
	ck_assert_str_eq(tok, "ya29.abc");
	ck_assert_int_eq(exp, 3599);
	free(tok);
	ck_assert_int_eq(bfs_gcp_token_parse(bad, strlen(bad), &tok, &exp, why, sizeof(why)),
			 -EBADMSG);
	ck_assert_ptr_null(tok);
	ck_assert_ptr_nonnull(strstr(why, "invalid_grant"));
	ck_assert_ptr_nonnull(strstr(why, "Invalid JWT Signature."));
	ck_assert_ptr_null(strstr(why, "SECRET"));
	ck_assert_int_eq(bfs_gcp_token_parse("<html>", 6, &tok, &exp, why, sizeof(why)), -EBADMSG);
	ck_assert_int_eq(bfs_gcp_token_parse("{\"access_token\": \"a b\"}", 23, &tok, &exp, why,
					     sizeof(why)),
			 -EBADMSG);
	ck_assert_int_eq(bfs_gcp_token_parse("{\"access_token\": \"ab\", \"token_type\": \"mac\"}",
					     43, &tok, &exp, why, sizeof(why)),
			 -EBADMSG);
	ck_assert_int_eq(bfs_gcp_token_parse("{\"access_token\": \"ab\", \"expires_in\": -5}", 40,
					     &tok, &exp, why, sizeof(why)),
			 -EBADMSG);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("credgcp");
	TCase *tc = tcase_create("credgcp");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, b64url_matches_rfc4648_vectors_without_padding);
	tcase_add_test(tc, the_jwt_is_signed_rs256_with_the_claims_google_checks);
	tcase_add_test(tc, the_token_requests_are_the_oauth_grants);
	tcase_add_test(tc, bad_key_files_name_the_file_and_the_field);
	tcase_add_test(tc, a_key_that_libcrypto_cannot_load_is_named);
	tcase_add_test(tc, the_chain_is_google_application_credentials_then_gcloud_then_metadata);
	tcase_add_test(tc, token_replies_are_parsed_and_errors_quote_no_secret);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
