/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the object-store client's parts that need no server:
 * the SigV4 signer (against AWS's documented examples), URI and query
 * encoding, s3:// URLs, configuration from options, environment and profile
 * files, request addresses, the listing and error XML, the retry backoff,
 * the cleaning of messages, and the verdict on responses.
 *
 * Each test runs in a forked process (check's default), so the environment
 * variables one sets do not reach another. */
#include "s3.h"
#include "s3_impl.h"
#include "s3sign.h"
#include "s3xml.h"
#include "testfiles.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the signer ---- */

/* AWS's documented example keys (Amazon S3 API Reference, "Signature
 * Calculations for the Authorization Header: Transferring Payload in a
 * Single Chunk (AWS Signature Version 4)", sig-v4-header-based-auth.html). */
#define DOC_KEY_ID "AKIAIOSFODNN7EXAMPLE"
#define DOC_SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define DOC_HOST "examplebucket.s3.amazonaws.com"
#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static time_t doc_time(void)
{
	struct tm tm = { .tm_year = 2013 - 1900, .tm_mon = 4, .tm_mday = 24 };

	return timegm(&tm); /* 20130524T000000Z */
}

static void sign_doc(const char *path, const struct bfs_s3_kv *q, size_t nq,
		     const struct bfs_s3_kv *h, size_t nh, struct bfs_s3_signed *sig, char **creq,
		     char **sts)
{
	char *query = NULL;
	struct bfs_s3_sigreq r = { .method = "GET",
				   .host = DOC_HOST,
				   .path = path,
				   .headers = h,
				   .nheaders = nh,
				   .region = "us-east-1",
				   .service = "s3",
				   .when = doc_time() };
	struct bfs_s3_creds cr = { DOC_KEY_ID, DOC_SECRET, NULL };

	ck_assert_int_eq(bfs_s3_query_build(&query, q, nq), 0);
	r.query = query;
	ck_assert_int_eq(bfs_s3_sign(sig, &r, &cr), 0);
	ck_assert_int_eq(bfs_s3_sign_canonical(creq, sts, &r, &cr), 0);
	free(query);
}

/* The "Example: GET Object" of the page above: bytes 0-9 of test.txt. The
 * documented canonical request, string to sign and signature
 * f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41. */
START_TEST(aws_doc_get_object_example_signs_as_documented)
{
	struct bfs_s3_kv h[] = { { "Range", "bytes=0-9" } };
	struct bfs_s3_signed sig;
	char *creq, *sts;

	sign_doc("/test.txt", NULL, 0, h, 1, &sig, &creq, &sts);
	ck_assert_str_eq(creq, "GET\n/test.txt\n\n"
			       "host:examplebucket.s3.amazonaws.com\n"
			       "range:bytes=0-9\n"
			       "x-amz-content-sha256:" EMPTY_SHA "\n"
			       "x-amz-date:20130524T000000Z\n\n"
			       "host;range;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA);
	ck_assert_str_eq(sts, "AWS4-HMAC-SHA256\n20130524T000000Z\n"
			      "20130524/us-east-1/s3/aws4_request\n"
			      "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
	ck_assert_str_eq(
		sig.authorization,
		"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
		"aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
		"Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	ck_assert_str_eq(sig.amz_date, "20130524T000000Z");
	ck_assert_str_eq(sig.content_sha256, EMPTY_SHA);
	free(creq);
	free(sts);
}
END_TEST

/* The same page's "Example: GET Bucket (List Objects)": GET
 * /?max-keys=2&prefix=J, documented signature
 * 34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7; the
 * parameters are given out of order, the query is sorted. */
START_TEST(aws_doc_list_objects_example_signs_as_documented)
{
	struct bfs_s3_kv q[] = { { "prefix", "J" }, { "max-keys", "2" } };
	struct bfs_s3_signed sig;
	char *creq, *sts;

	sign_doc("/", q, 2, NULL, 0, &sig, &creq, &sts);
	ck_assert_ptr_nonnull(strstr(creq, "GET\n/\nmax-keys=2&prefix=J\n"));
	ck_assert_str_eq(
		sig.authorization,
		"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
		"aws4_request,SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
		"Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
	free(creq);
	free(sts);
}
END_TEST

/* The page's "Example: GET Bucket Lifecycle": a parameter with no value
 * ("lifecycle="), documented signature
 * fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543. */
START_TEST(aws_doc_lifecycle_example_signs_an_empty_value_as_documented)
{
	struct bfs_s3_kv q[] = { { "lifecycle", NULL } };
	struct bfs_s3_signed sig;
	char *creq, *sts;

	sign_doc("/", q, 1, NULL, 0, &sig, &creq, &sts);
	ck_assert_ptr_nonnull(strstr(creq, "GET\n/\nlifecycle=\n"));
	ck_assert_str_eq(
		sig.authorization,
		"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
		"aws4_request,SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
		"Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
	free(creq);
	free(sts);
}
END_TEST

START_TEST(a_session_token_is_sent_and_signed)
{
	struct bfs_s3_sigreq r = { .method = "GET",
				   .host = DOC_HOST,
				   .path = "/k",
				   .region = "us-east-1",
				   .service = "s3",
				   .when = doc_time() };
	struct bfs_s3_creds cr = { DOC_KEY_ID, DOC_SECRET, "TOKEN/with+odd=chars" };
	struct bfs_s3_signed a, b;
	char *creq, *sts;

	ck_assert_int_eq(bfs_s3_sign(&a, &r, &cr), 0);
	ck_assert_int_eq(bfs_s3_sign_canonical(&creq, &sts, &r, &cr), 0);
	ck_assert_ptr_nonnull(strstr(a.authorization, "SignedHeaders=host;x-amz-content-sha256;"
						      "x-amz-date;x-amz-security-token,"));
	ck_assert_ptr_nonnull(strstr(creq, "\nx-amz-security-token:TOKEN/with+odd=chars\n"));
	cr.token = NULL;
	ck_assert_int_eq(bfs_s3_sign(&b, &r, &cr), 0);
	ck_assert_str_ne(a.authorization, b.authorization);
	ck_assert_ptr_null(strstr(a.authorization, DOC_SECRET));
	ck_assert_ptr_null(strstr(creq, DOC_SECRET));
	ck_assert_ptr_null(strstr(sts, DOC_SECRET));
	free(creq);
	free(sts);
}
END_TEST

START_TEST(header_values_are_trimmed_and_names_lowered_and_sorted)
{
	struct bfs_s3_kv h[] = { { "If-Match", "  \"abc\"   x  " }, { "Range", "bytes=1-2" } };
	struct bfs_s3_sigreq r = { .method = "GET",
				   .host = "h:9000",
				   .path = "/b/k",
				   .headers = h,
				   .nheaders = 2,
				   .region = "r",
				   .service = "s3",
				   .when = doc_time() };
	struct bfs_s3_creds cr = { "ID", "S", NULL };
	char *creq, *sts;

	ck_assert_int_eq(bfs_s3_sign_canonical(&creq, &sts, &r, &cr), 0);
	ck_assert_str_eq(creq, "GET\n/b/k\n\nhost:h:9000\nif-match:\"abc\" x\nrange:bytes=1-2\n"
			       "x-amz-content-sha256:" EMPTY_SHA "\nx-amz-date:20130524T000000Z\n\n"
			       "host;if-match;range;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA);
	free(creq);
	free(sts);
}
END_TEST

START_TEST(the_signer_refuses_what_it_cannot_sign)
{
	struct bfs_s3_kv dup[] = { { "range", "a" }, { "Range", "b" } };
	struct bfs_s3_kv own[] = { { "X-Amz-Date", "x" } };
	struct bfs_s3_kv crlf[] = { { "range", "a\r\nx-evil: 1" } };
	struct bfs_s3_kv badname[] = { { "ra nge", "a" } };
	struct bfs_s3_sigreq r = {
		.method = "GET", .host = "h", .path = "/", .region = "r", .service = "s3"
	};
	struct bfs_s3_creds cr = { "ID", "S", NULL };
	struct bfs_s3_signed sig;

	r.headers = dup;
	r.nheaders = 2;
	ck_assert_int_eq(bfs_s3_sign(&sig, &r, &cr), -EINVAL);
	r.headers = own;
	r.nheaders = 1;
	ck_assert_int_eq(bfs_s3_sign(&sig, &r, &cr), -EINVAL);
	r.headers = crlf;
	ck_assert_int_eq(bfs_s3_sign(&sig, &r, &cr), -EINVAL);
	r.headers = badname;
	ck_assert_int_eq(bfs_s3_sign(&sig, &r, &cr), -EINVAL);
	r.nheaders = 0;
	cr.key_id = "ID/with,slash";
	ck_assert_int_eq(bfs_s3_sign(&sig, &r, &cr), -EINVAL);
	cr.key_id = "ID";
	r.region = "us east";
	ck_assert_int_eq(bfs_s3_sign(&sig, &r, &cr), -EINVAL);
}
END_TEST

START_TEST(paths_keep_slashes_and_query_values_encode_them)
{
	static const struct {
		const char *in, *path, *query;
	} cases[] = {
		{ "a b+c/d~e_f.g-h", "a%20b%2Bc/d~e_f.g-h", "a%20b%2Bc%2Fd~e_f.g-h" },
		{ "caf\xc3\xa9/\xe6\x97\xa5.tfrecord", "caf%C3%A9/%E6%97%A5.tfrecord",
		  "caf%C3%A9%2F%E6%97%A5.tfrecord" },
		{ "x=1&y=*!'()%", "x%3D1%26y%3D%2A%21%27%28%29%25",
		  "x%3D1%26y%3D%2A%21%27%28%29%25" },
		{ "a/../b//c", "a/../b//c", "a%2F..%2Fb%2F%2Fc" },
		{ "", "", "" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *p, *q;

		ck_assert_int_eq(bfs_s3_uri_encode(&p, cases[i].in, true), 0);
		ck_assert_int_eq(bfs_s3_uri_encode(&q, cases[i].in, false), 0);
		ck_assert_str_eq(p, cases[i].path);
		ck_assert_str_eq(q, cases[i].query);
		free(p);
		free(q);
	}
}
END_TEST

START_TEST(the_query_is_sorted_by_encoded_name_then_value)
{
	struct bfs_s3_kv q[] = {
		{ "prefix", "train/a b" },
		{ "list-type", "2" },
		{ "continuation-token", "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=" },
		{ "a", "2" },
		{ "a", "1" },
		{ "empty", NULL },
	};
	char *s;

	ck_assert_int_eq(bfs_s3_query_build(&s, q, 6), 0);
	ck_assert_str_eq(s,
			 "a=1&a=2&continuation-token=1ueGcxLPRx1Tr%2FXYExHnhbYLgveDs2J%2Fwm36Hy4v"
			 "bOwM%3D&empty=&list-type=2&prefix=train%2Fa%20b");
	free(s);
	ck_assert_int_eq(bfs_s3_query_build(&s, NULL, 0), 0);
	ck_assert_str_eq(s, "");
	free(s);
}
END_TEST

/* ---- URLs ---- */

START_TEST(urls_parse_into_bucket_key_and_listing_prefix)
{
	static const struct {
		const char *url;
		enum bfs_s3_scheme scheme;
		enum bfs_s3_url_kind kind;
		const char *bucket, *key, *prefix;
	} cases[] = {
		{ "s3://b", BFS_S3_SCHEME_S3, BFS_S3_URL_PREFIX, "b", "", "" },
		{ "s3://b/", BFS_S3_SCHEME_S3, BFS_S3_URL_PREFIX, "b", "", "" },
		{ "s3://my-bucket/train/", BFS_S3_SCHEME_S3, BFS_S3_URL_PREFIX, "my-bucket",
		  "train/", "train/" },
		{ "s3://b/train/x.tfrecord", BFS_S3_SCHEME_S3, BFS_S3_URL_KEY, "b",
		  "train/x.tfrecord", "train/x.tfrecord" },
		{ "S3://b/a b+c", BFS_S3_SCHEME_S3, BFS_S3_URL_KEY, "b", "a b+c", "a b+c" },
		{ "s3://b/train/part-*.tfrecord.gz", BFS_S3_SCHEME_S3, BFS_S3_URL_GLOB, "b",
		  "train/part-*.tfrecord.gz", "train/part-" },
		{ "s3://b/*.gz", BFS_S3_SCHEME_S3, BFS_S3_URL_GLOB, "b", "*.gz", "" },
		{ "s3://b/d/x[0-3]", BFS_S3_SCHEME_S3, BFS_S3_URL_GLOB, "b", "d/x[0-3]", "d/x" },
		{ "gs://gcs.bucket_1/data/", BFS_S3_SCHEME_GS, BFS_S3_URL_PREFIX, "gcs.bucket_1",
		  "data/", "data/" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct bfs_s3_url u;

		ck_assert_msg(bfs_s3_url_parse(&u, cases[i].url) == 0, "%s: %s", cases[i].url,
			      bfs_err_msg());
		ck_assert_int_eq(u.scheme, cases[i].scheme);
		ck_assert_int_eq(u.kind, cases[i].kind);
		ck_assert_str_eq(u.bucket, cases[i].bucket);
		ck_assert_str_eq(u.key, cases[i].key);
		ck_assert_str_eq(u.prefix, cases[i].prefix);
		bfs_s3_url_destroy(&u);
	}
}
END_TEST

START_TEST(bad_urls_are_refused_with_a_reason)
{
	static const char *const bad[] = {
		"s3:/b/k",   "http://b/k",     "s3://",	    "s3:///k",
		"s3://b*/k", "s3://b/tr*in/x", "s3://b%/k", "/local/dir"
	};
	char longkey[1200];
	struct bfs_s3_url u;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(bfs_s3_url_parse(&u, bad[i]) == -EINVAL, "%s", bad[i]);
		ck_assert(strlen(bfs_err_msg()) > 5);
	}
	ck_assert_int_eq(bfs_s3_url_parse(&u, "s3://b/tr*in/x"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "last part"));
	memcpy(longkey, "s3://b/", 7);
	memset(longkey + 7, 'k', sizeof(longkey) - 8);
	longkey[sizeof(longkey) - 1] = '\0';
	ck_assert_int_eq(bfs_s3_url_parse(&u, longkey), -EINVAL);
	ck_assert(bfs_s3_url_is("gs://x") && bfs_s3_url_is("s3://x") && !bfs_s3_url_is("/x"));
}
END_TEST

START_TEST(listed_keys_match_the_source_as_a_directory_or_glob_would)
{
	struct bfs_s3_url p, k, g;

	ck_assert_int_eq(bfs_s3_url_parse(&p, "s3://b/train/"), 0);
	ck_assert_int_eq(bfs_s3_url_parse(&k, "s3://b/train/a.gz"), 0);
	ck_assert_int_eq(bfs_s3_url_parse(&g, "s3://b/train/part-*.gz"), 0);
	ck_assert(bfs_s3_url_match(&p, "train/a.gz"));
	ck_assert(bfs_s3_url_match(&p, "train/sub/a.gz"));
	ck_assert(!bfs_s3_url_match(&p, "trainx/a.gz"));
	ck_assert(bfs_s3_url_match(&k, "train/a.gz"));
	ck_assert(!bfs_s3_url_match(&k, "train/a.gz.1"));
	ck_assert(bfs_s3_url_match(&g, "train/part-0001.gz"));
	ck_assert(!bfs_s3_url_match(&g, "train/part-0001.gz.idx"));
	ck_assert(!bfs_s3_url_match(&g, "train/part-x/y.gz"));
	ck_assert(!bfs_s3_url_match(&g, "test/part-0001.gz"));
	bfs_s3_url_destroy(&p);
	bfs_s3_url_destroy(&k);
	bfs_s3_url_destroy(&g);
}
END_TEST

/* ---- configuration ---- */

static char home[64];

/* The last clean_env's HOME, removed after each test of the config case
 * (a checked fixture: in the test's own process). */
static void drop_home(void)
{
	if (!home[0])
		return;
	test_rmdir(home);
	home[0] = '\0';
}

/* A fresh HOME with no AWS variables set. */
static void clean_env(void)
{
	static const char *const vars[] = {
		"AWS_ENDPOINT_URL",
		"AWS_ENDPOINT_URL_S3",
		"AWS_REGION",
		"AWS_DEFAULT_REGION",
		"AWS_ACCESS_KEY_ID",
		"AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN",
		"AWS_PROFILE",
		"AWS_SHARED_CREDENTIALS_FILE",
		"AWS_CONFIG_FILE",
		"AWS_CA_BUNDLE",
		"AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_ROLE_ARN",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI",
	};
	char aws[96];

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	/* the credential chain never asks this machine's metadata service */
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	drop_home();
	test_mkdir(home, sizeof(home), "check_s3");
	setenv("HOME", home, 1);
	snprintf(aws, sizeof(aws), "%s/.aws", home);
	mkdir(aws, 0700);
}

static void put_file(const char *name, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/.aws/%s", home, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static int resolve(struct bfs_s3_config *c, enum bfs_s3_scheme s, const struct bfs_s3_options *o)
{
	bfs_s3_config_init(c);
	return bfs_s3_config_resolve(c, s, o);
}

START_TEST(environment_credentials_region_and_endpoint_are_used)
{
	struct bfs_s3_config c;

	clean_env();
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SECRETENV", 1);
	setenv("AWS_SESSION_TOKEN", "TOKENENV", 1);
	setenv("AWS_DEFAULT_REGION", "eu-west-1", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), 0);
	ck_assert_str_eq(c.key_id, "AKIDENV");
	ck_assert_str_eq(c.secret, "SECRETENV");
	ck_assert_str_eq(c.session_token, "TOKENENV");
	ck_assert_str_eq(c.region, "eu-west-1");
	ck_assert_str_eq(c.endpoint, "https://s3.eu-west-1.amazonaws.com");
	ck_assert(!c.path_style);
	bfs_s3_config_destroy(&c);

	setenv("AWS_REGION", "us-west-2", 1); /* over AWS_DEFAULT_REGION */
	setenv("AWS_ENDPOINT_URL", "http://other:1", 1);
	setenv("AWS_ENDPOINT_URL_S3", "HTTP://MinIO.local:9000/", 1); /* over AWS_ENDPOINT_URL */
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), 0);
	ck_assert_str_eq(c.region, "us-west-2");
	ck_assert_str_eq(c.endpoint, "http://minio.local:9000");
	ck_assert(c.path_style);
	bfs_s3_config_destroy(&c);
}
END_TEST

START_TEST(options_come_before_the_environment)
{
	struct bfs_s3_options o = { .endpoint = "https://r2.example:443/base/", .region = "auto" };
	struct bfs_s3_config c;

	clean_env();
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SECRETENV", 1);
	setenv("AWS_REGION", "us-west-2", 1);
	setenv("AWS_ENDPOINT_URL", "http://other:1", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, &o), 0);
	ck_assert_str_eq(c.endpoint, "https://r2.example/base");
	ck_assert_str_eq(c.region, "auto");
	ck_assert(c.path_style);
	bfs_s3_config_destroy(&c);
	o.no_sign_request = true;
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, &o), 0);
	ck_assert(c.anonymous);
	ck_assert_ptr_null(c.key_id);
	ck_assert_ptr_null(c.secret);
	bfs_s3_config_destroy(&c);
}
END_TEST

START_TEST(the_profile_files_give_credentials_region_and_endpoint)
{
	struct bfs_s3_config c;

	clean_env();
	put_file("credentials",
		 "# comment\n[default]\naws_access_key_id = AKIDDEF\n"
		 "aws_secret_access_key=SECRETDEF\n\n[dev]\r\n"
		 "aws_access_key_id = AKIDDEV\r\naws_secret_access_key = SECRETDEV\r\n"
		 "aws_session_token = TOKENDEV\r\n");
	put_file("config", "[default]\nregion = ap-south-1\n[profile dev]\nregion=eu-central-1\n"
			   "s3 =\n  endpoint_url = http://127.0.0.1:9000\n"
			   "  addressing_style = virtual\n");
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), 0);
	ck_assert_str_eq(c.key_id, "AKIDDEF");
	ck_assert_str_eq(c.secret, "SECRETDEF");
	ck_assert_ptr_null(c.session_token);
	ck_assert_str_eq(c.region, "ap-south-1");
	ck_assert_str_eq(c.endpoint, "https://s3.ap-south-1.amazonaws.com");
	ck_assert_ptr_nonnull(strstr(c.source, "profile 'default'"));
	bfs_s3_config_destroy(&c);

	setenv("AWS_PROFILE", "dev", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), 0);
	ck_assert_str_eq(c.key_id, "AKIDDEV");
	ck_assert_str_eq(c.secret, "SECRETDEV");
	ck_assert_str_eq(c.session_token, "TOKENDEV");
	ck_assert_str_eq(c.region, "eu-central-1");
	ck_assert_str_eq(c.endpoint, "http://127.0.0.1:9000");
	ck_assert(!c.path_style);
	bfs_s3_config_destroy(&c);

	/* the environment's keys come before the profile's */
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SECRETENV", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), 0);
	ck_assert_str_eq(c.key_id, "AKIDENV");
	ck_assert_ptr_null(c.session_token);
	bfs_s3_config_destroy(&c);
}
END_TEST

START_TEST(the_file_variables_move_the_profile_files)
{
	struct bfs_s3_options o = { .profile = "p" };
	char path[128];
	struct bfs_s3_config c;

	clean_env();
	put_file("elsewhere", "[p]\naws_access_key_id=AKIDP\naws_secret_access_key=SP\n");
	put_file("conf2", "[profile p]\nregion = sa-east-1\nendpoint_url = http://h:1/\n");
	snprintf(path, sizeof(path), "%s/.aws/elsewhere", home);
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	setenv("AWS_CONFIG_FILE", "~/.aws/conf2", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, &o), 0);
	ck_assert_str_eq(c.key_id, "AKIDP");
	ck_assert_str_eq(c.region, "sa-east-1");
	ck_assert_str_eq(c.endpoint, "http://h:1");
	bfs_s3_config_destroy(&c);
}
END_TEST

START_TEST(missing_or_unusable_credentials_say_what_to_do)
{
	struct bfs_s3_config c;

	clean_env();
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), -EACCES);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "no_sign_request"));
	setenv("AWS_ACCESS_KEY_ID", "AKIDONLY", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "AWS_SECRET_ACCESS_KEY"));
	unsetenv("AWS_ACCESS_KEY_ID");
	setenv("AWS_PROFILE", "nosuch", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "'nosuch'"));
	put_file("config", "[profile sso]\nsso_session = corp\nregion = us-east-2\n");
	setenv("AWS_PROFILE", "sso", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), -EACCES);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "sso_session"));
	unsetenv("AWS_PROFILE");
	setenv("AWS_REGION", "us east", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), -EINVAL);
	setenv("AWS_REGION", "us-east-1", 1);
	setenv("AWS_ENDPOINT_URL", "http://user:pw@host/", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), -EINVAL);
	ck_assert_ptr_null(strstr(bfs_err_msg(), "pw@")); /* never echoed: it may hold a secret */
}
END_TEST

START_TEST(gs_urls_go_to_google_path_style_in_region_auto)
{
	struct bfs_s3_config c;

	clean_env();
	setenv("AWS_ACCESS_KEY_ID", "GOOGHMAC", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "HMACSECRET", 1);
	setenv("AWS_ENDPOINT_URL", "http://not-for-gs:1", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_GS, NULL), 0);
	ck_assert_str_eq(c.endpoint, "https://storage.googleapis.com");
	ck_assert_str_eq(c.region, "auto");
	ck_assert(c.path_style);
	ck_assert_int_eq(c.scheme, BFS_S3_SCHEME_GS);
	bfs_s3_config_destroy(&c);
}
END_TEST

START_TEST(the_description_names_no_secret)
{
	struct bfs_s3_config c;
	char line[512];

	clean_env();
	setenv("AWS_ACCESS_KEY_ID", "AKIAABCDEFGHWXYZ", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "VERYSECRETVALUE", 1);
	setenv("AWS_SESSION_TOKEN", "TOKENVALUE", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), 0);
	bfs_s3_config_describe(&c, line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, "****WXYZ"));
	ck_assert_ptr_nonnull(strstr(line, "virtual-hosted"));
	ck_assert_ptr_null(strstr(line, "VERYSECRETVALUE"));
	ck_assert_ptr_null(strstr(line, "TOKENVALUE"));
	ck_assert_ptr_null(strstr(line, "AKIAABCDEFGH"));
	bfs_s3_config_destroy(&c);
	ck_assert_ptr_null(c.secret);
}
END_TEST

/* ---- addresses ---- */

static void target(const struct bfs_s3_config *c, const char *bucket, const char *key,
		   const char *query, const char *url, const char *host, const char *path)
{
	struct bfs_s3_target t;

	ck_assert_int_eq(bfs_s3_target_build(&t, c, bucket, key, query), 0);
	ck_assert_str_eq(t.url, url);
	ck_assert_str_eq(t.host, host);
	ck_assert_str_eq(t.path, path);
	bfs_s3_target_destroy(&t);
}

START_TEST(aws_is_virtual_hosted_and_custom_endpoints_path_style)
{
	struct bfs_s3_config c;

	bfs_s3_config_init(&c);
	c.endpoint = "https://s3.us-east-1.amazonaws.com";
	target(&c, "my-bucket", "a b/c+d", NULL,
	       "https://my-bucket.s3.us-east-1.amazonaws.com/a%20b/c%2Bd",
	       "my-bucket.s3.us-east-1.amazonaws.com", "/a%20b/c%2Bd");
	target(&c, "my-bucket", NULL, "list-type=2",
	       "https://my-bucket.s3.us-east-1.amazonaws.com/?list-type=2",
	       "my-bucket.s3.us-east-1.amazonaws.com", "/");
	/* a dotted bucket cannot be a TLS host: path-style */
	target(&c, "my.bucket", "k", NULL, "https://s3.us-east-1.amazonaws.com/my.bucket/k",
	       "s3.us-east-1.amazonaws.com", "/my.bucket/k");
	c.path_style = true;
	c.endpoint = "http://127.0.0.1:4568";
	target(&c, "b", "x/y.gz", NULL, "http://127.0.0.1:4568/b/x/y.gz", "127.0.0.1:4568",
	       "/b/x/y.gz");
	target(&c, "b", NULL, "list-type=2&prefix=a%2Fb",
	       "http://127.0.0.1:4568/b?list-type=2&prefix=a%2Fb", "127.0.0.1:4568", "/b");
	c.endpoint = "https://gw.example/s3";
	target(&c, "b", "k", NULL, "https://gw.example/s3/b/k", "gw.example", "/s3/b/k");
}
END_TEST

/* ---- XML ---- */

static const char list_page1[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	"<Name>b</Name><Prefix>t/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
	"<IsTruncated>true</IsTruncated>"
	"<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</"
	"NextContinuationToken>"
	"<Contents><Key>t/b.gz</Key><LastModified>2009-10-12T17:50:30.000Z</LastModified>"
	"<ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag><Size>434234</Size>"
	"<StorageClass>STANDARD</StorageClass></Contents>"
	"<Contents><Key>t/a &amp; c.gz</Key><ETag>\"e\"</ETag><Size>0</Size></Contents>"
	"</ListBucketResult>";

START_TEST(a_listing_page_gives_keys_sizes_etags_and_the_token)
{
	struct bfs_s3xml_list l = { 0 };
	char why[256];

	ck_assert_int_eq(bfs_s3xml_parse_list(&l, list_page1, strlen(list_page1), why, sizeof(why)),
			 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_str_eq(l.objs[0].key, "t/b.gz");
	ck_assert_uint_eq(l.objs[0].size, 434234);
	ck_assert_str_eq(l.objs[0].etag, "\"fba9dede5f27731c9771645a39863328\"");
	ck_assert_str_eq(l.objs[1].key, "t/a & c.gz");
	ck_assert(l.truncated);
	ck_assert_str_eq(l.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
	ck_assert_uint_eq(l.page_keys, 2);
	bfs_s3xml_list_destroy(&l);
}
END_TEST

START_TEST(url_encoded_keys_are_decoded)
{
	static const char xml[] =
		"<ListBucketResult><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
		"<Contents><Key>d/a+b%2Bc%C3%A9%0A</Key><Size>1</Size><ETag>\"x\"</ETag></Contents>"
		"</ListBucketResult>";
	static const char bad[] = "<ListBucketResult><EncodingType>url</EncodingType>"
				  "<Contents><Key>a%00b</Key><Size>1</Size></Contents>"
				  "</ListBucketResult>";
	struct bfs_s3xml_list l = { 0 };
	char why[256];

	ck_assert_int_eq(bfs_s3xml_parse_list(&l, xml, strlen(xml), why, sizeof(why)), 0);
	ck_assert_str_eq(l.objs[0].key, "d/a b+c\xc3\xa9\n");
	ck_assert(!l.truncated);
	ck_assert_ptr_null(l.next_token);
	bfs_s3xml_list_destroy(&l);
	ck_assert_int_eq(bfs_s3xml_parse_list(&l, bad, strlen(bad), why, sizeof(why)), -EBADMSG);
	bfs_s3xml_list_destroy(&l);
}
END_TEST

START_TEST(bad_listings_are_refused_with_a_reason)
{
	static const char *const bad[] = {
		"",
		"not xml",
		"<Error><Code>NoSuchBucket</Code></Error>",
		"<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
		"<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>",
		"<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></"
		"ListBucketResult>",
		"<ListBucketResult><Contents><Key>k</Key><Size>99999999999999999999</Size></"
		"Contents>"
		"</ListBucketResult>",
		"<ListBucketResult><Contents><Key>k</Key><Key>j</Key><Size>1</Size></Contents>"
		"</ListBucketResult>",
		"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
		"<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>",
		"<!DOCTYPE x [<!ENTITY a \"aaaa\">]><ListBucketResult>&a;</ListBucketResult>",
		"<ListBucketResult><a><a><a><a><a><a><a><a><a><a><a><a><a><a><a><a><a>"
		"</a></a></a></a></a></a></a></a></a></a></a></a></a></a></a></a></a>"
		"</ListBucketResult>",
		"<ListBucketResult><Contents><Key>k</Key><Size>1</Size></Contents>",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct bfs_s3xml_list l = { 0 };
		char why[256] = "";

		ck_assert_msg(bfs_s3xml_parse_list(&l, bad[i], strlen(bad[i]), why, sizeof(why)) ==
				      -EBADMSG,
			      "%s", bad[i]);
		ck_assert_msg(strlen(why) > 3, "no reason for %s", bad[i]);
		bfs_s3xml_list_destroy(&l);
	}
}
END_TEST

START_TEST(error_documents_give_code_message_and_region)
{
	static const char xml[] =
		"<?xml version=\"1.0\" "
		"encoding=\"UTF-8\"?>\n<Error><Code>AuthorizationHeaderMalformed"
		"</Code><Message>the region 'us-east-1' is wrong; expecting 'eu-west-1'</Message>"
		"<Region>eu-west-1</Region><RequestId>X</RequestId></Error>";
	struct bfs_s3xml_error e;

	ck_assert_int_eq(bfs_s3xml_parse_error(&e, xml, strlen(xml)), 0);
	ck_assert_str_eq(e.code, "AuthorizationHeaderMalformed");
	ck_assert_str_eq(e.region, "eu-west-1");
	ck_assert_ptr_nonnull(strstr(e.message, "expecting"));
	ck_assert_int_eq(bfs_s3xml_parse_error(&e, "<html>503</html>", 16), -EBADMSG);
	ck_assert_int_eq(bfs_s3xml_parse_error(&e, "<Error></Error>", 15), -EBADMSG);
}
END_TEST

/* ---- policy and messages ---- */

START_TEST(backoff_doubles_with_jitter_up_to_its_cap)
{
	struct bfs_s3_config c;

	bfs_s3_config_init(&c);
	c.backoff_ms = 100;
	c.backoff_max_ms = 1000;
	for (uint64_t rnd = 0; rnd < 500; rnd += 7) {
		unsigned a = bfs_s3_backoff_ms(&c, 1, rnd), b = bfs_s3_backoff_ms(&c, 3, rnd),
			 z = bfs_s3_backoff_ms(&c, 30, rnd);

		ck_assert(a >= 50 && a <= 100);
		ck_assert(b >= 200 && b <= 400);
		ck_assert(z >= 500 && z <= 1000);
	}
	ck_assert_uint_ne(bfs_s3_backoff_ms(&c, 2, 1), bfs_s3_backoff_ms(&c, 2, 2));
}
END_TEST

/* The documented budget (README.md, docs/contract.md): 8 tries, whose 7
 * waits add up to 6 to 11 s (the tries end it, not the 30 s cap);
 * AWS_MAX_ATTEMPTS sets the tries. */
START_TEST(the_retry_budget_is_the_documented_one)
{
	struct bfs_s3_config c;
	unsigned lo = 0, hi = 0;

	bfs_s3_config_init(&c);
	ck_assert_uint_eq(c.tries, 8);
	ck_assert_uint_eq(c.retry_ms, 30000);
	for (unsigned r = 1; r < c.tries; r++) {
		lo += bfs_s3_backoff_ms(&c, r, 0);
		hi += bfs_s3_backoff_ms(&c, r, UINT64_MAX);
	}
	ck_assert_msg(lo >= 5500 && hi <= 11500 && hi < c.retry_ms, "%u to %u ms", lo, hi);
	bfs_s3_config_destroy(&c);

	clean_env();
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SECRETENV", 1);
	setenv("AWS_MAX_ATTEMPTS", "3", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), 0);
	ck_assert_uint_eq(c.tries, 3);
	bfs_s3_config_destroy(&c);
	setenv("AWS_MAX_ATTEMPTS", "0", 1);
	ck_assert_int_eq(resolve(&c, BFS_S3_SCHEME_S3, NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(bfs_err_msg(), "AWS_MAX_ATTEMPTS=0"));
	bfs_s3_config_destroy(&c);
	unsetenv("AWS_MAX_ATTEMPTS");
}
END_TEST

START_TEST(messages_lose_secrets_and_line_breaks)
{
	struct bfs_s3_config c;
	char m[128];

	bfs_s3_config_init(&c);
	c.secret = "S3CRETdact";
	c.session_token = "T0KEN";
	snprintf(m, sizeof(m), "a S3CRETdact b\nc T0KEN T0KEN\r");
	bfs_s3_msg_clean(m, sizeof(m), &c);
	ck_assert_str_eq(m, "a [redacted] b c [redacted] [redacted] ");
	c.secret = "dact"; /* in the mark itself: no endless loop */
	snprintf(m, sizeof(m), "x dact y");
	bfs_s3_msg_clean(m, sizeof(m), &c);
	ck_assert_str_eq(m, "x [redacted] y");
	c.secret = "0123456789abcdef";
	memcpy(m, "0123456789abcdef0123456", 23); /* the secret, and half of it again */
	m[23] = '\0';
	bfs_s3_msg_clean(m, 24, &c);
	ck_assert_ptr_null(strstr(m, "0123456789abcdef"));
}
END_TEST

/* ---- responses ---- */

static void feed(struct bfs_s3resp *r, const char *head, const char *body)
{
	for (const char *l = head; *l;) {
		const char *e = strchr(l, '\n');
		size_t n = e ? (size_t)(e - l) + 1 : strlen(l);

		bfs_s3resp_header(r, l, n);
		l += n;
	}
	if (body)
		bfs_s3resp_body(r, body, strlen(body));
}

static enum bfs_s3resp_verdict judge(struct bfs_s3resp *r, int *err, char *why)
{
	struct bfs_s3_config c;

	bfs_s3_config_init(&c);
	c.region = "us-east-1";
	c.source = "the environment";
	return bfs_s3resp_judge(r, BFS_S3RESP_NET_OK, false, NULL, &c, err, why, 512);
}

START_TEST(a_ranged_read_is_checked_against_its_range_and_etag)
{
	char buf[8], why[512];
	struct bfs_s3resp r = {
		.kind = BFS_S3RESP_GET, .off = 10, .len = 4, .dst = buf, .if_match = "\"v1\""
	};
	int err;

	feed(&r,
	     "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 10-13/100\r\n"
	     "ETag: \"v1\"\r\nContent-Length: 4\r\n\r\n",
	     "abcd");
	ck_assert_int_eq(judge(&r, &err, why), BFS_S3RESP_OK);
	ck_assert_uint_eq(r.object_size, 100);
	ck_assert_int_eq(memcmp(buf, "abcd", 4), 0);

	feed(&r, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 10-13/100\r\n\r\n", "ab");
	ck_assert_int_eq(judge(&r, &err, why), BFS_S3RESP_RETRY); /* short body */
	ck_assert_ptr_nonnull(strstr(why, "short"));

	feed(&r,
	     "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 10-13/100\r\n"
	     "ETag: \"v2\"\r\n\r\n",
	     "abcd");
	ck_assert_int_eq(judge(&r, &err, why), BFS_S3RESP_FAIL); /* a store that ignores If-Match */
	ck_assert_int_eq(err, -ESTALE);
	ck_assert_ptr_nonnull(strstr(why, "re-mount"));

	feed(&r, "HTTP/1.1 412 Precondition Failed\r\n\r\n",
	     "<Error><Code>PreconditionFailed</Code></Error>");
	ck_assert_int_eq(judge(&r, &err, why), BFS_S3RESP_FAIL);
	ck_assert_int_eq(err, -ESTALE);

	feed(&r, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 10-12/13\r\n\r\n", "abc");
	ck_assert_int_eq(judge(&r, &err, why), BFS_S3RESP_FAIL); /* past the end */
	r.to_end = true;
	feed(&r, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 10-12/13\r\n\r\n", "abc");
	ck_assert_int_eq(judge(&r, &err, why), BFS_S3RESP_OK);
	ck_assert_uint_eq(r.got, 3);

	r.to_end = false;
	feed(&r, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 10-13/100\r\n\r\n",
	     "abcdefgh");
	ck_assert(r.overflow);
	ck_assert_int_eq(judge(&r, &err, why), BFS_S3RESP_FAIL);
	feed(&r, "HTTP/1.1 200 OK\r\n\r\n", "0123");
	ck_assert_int_eq(judge(&r, &err, why), BFS_S3RESP_FAIL); /* Range ignored, off 10 */
	ck_assert_ptr_nonnull(strstr(why, "ignored the Range"));
	bfs_s3_str_free(&r.body);
}
END_TEST

START_TEST(error_statuses_map_to_errno_and_transient_ones_retry)
{
	static const struct {
		const char *status, *body;
		enum bfs_s3resp_verdict v;
		int err;
		const char *words;
	} cases[] = {
		{ "HTTP/1.1 503 Slow Down\r\n",
		  "<Error><Code>SlowDown</Code><Message>Please reduce your request "
		  "rate.</Message></Error>",
		  BFS_S3RESP_RETRY, -EIO, "SlowDown: Please reduce your request rate. (HTTP 503)" },
		{ "HTTP/1.1 429 Too Many\r\n", "", BFS_S3RESP_RETRY, -EIO, "HTTP 429" },
		{ "HTTP/1.1 500 Oops\r\n", "<html/>", BFS_S3RESP_RETRY, -EIO, "HTTP 500" },
		{ "HTTP/1.1 404 Not Found\r\n",
		  "<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not "
		  "exist</Message>"
		  "</Error>",
		  BFS_S3RESP_FAIL, -ENOENT, "NoSuchBucket" },
		{ "HTTP/1.1 403 Forbidden\r\n",
		  "<Error><Code>InvalidAccessKeyId</Code><Message>no such key id</Message></Error>",
		  BFS_S3RESP_FAIL, -EACCES, "credentials from the environment" },
		{ "HTTP/1.1 403 Forbidden\r\n",
		  "<Error><Code>SignatureDoesNotMatch</Code><Message>m</Message></Error>",
		  BFS_S3RESP_FAIL, -EACCES, "check the secret key" },
		{ "HTTP/1.1 400 Bad Request\r\n",
		  "<Error><Code>ExpiredToken</Code><Message>The provided token has "
		  "expired.</Message>"
		  "</Error>",
		  BFS_S3RESP_FAIL, -EACCES, "ExpiredToken" },
		{ "HTTP/1.1 400 Bad Request\r\n",
		  "<Error><Code>RequestTimeout</Code><Message>not read from in "
		  "time</Message></Error>",
		  BFS_S3RESP_RETRY, -EIO, "RequestTimeout" },
		{ "HTTP/1.1 400 Bad Request\r\n", "<Error><Code>InvalidArgument</Code></Error>",
		  BFS_S3RESP_FAIL, -EINVAL, "InvalidArgument" },
		{ "HTTP/1.1 301 Moved\r\nx-amz-bucket-region: eu-west-1\r\n",
		  "<Error><Code>PermanentRedirect</Code><Message>m</Message></Error>",
		  BFS_S3RESP_FAIL, -EINVAL, "region=eu-west-1" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[4], why[512];
		struct bfs_s3resp r = { .kind = BFS_S3RESP_GET, .off = 0, .len = 4, .dst = buf };
		int err = 0;

		feed(&r, cases[i].status, cases[i].body);
		ck_assert_int_eq(judge(&r, &err, why), cases[i].v);
		ck_assert_int_eq(err, cases[i].err);
		ck_assert_msg(strstr(why, cases[i].words), "'%s' lacks '%s'", why, cases[i].words);
		bfs_s3_str_free(&r.body);
	}
}
END_TEST

START_TEST(transport_failures_retry_and_unreachable_endpoints_are_named)
{
	struct bfs_s3_config c;
	struct bfs_s3resp r = { .kind = BFS_S3RESP_HEAD };
	char why[256];
	int err;

	bfs_s3_config_init(&c);
	c.endpoint = "http://127.0.0.1:1";
	ck_assert_int_eq(bfs_s3resp_judge(&r, BFS_S3RESP_NET_TRANSIENT, true,
					  "Failed to connect to 127.0.0.1 port 1", &c, &err, why,
					  sizeof(why)),
			 BFS_S3RESP_RETRY);
	ck_assert_str_eq(why, "cannot reach http://127.0.0.1:1: Failed to connect to 127.0.0.1 "
			      "port 1");
	ck_assert_int_eq(bfs_s3resp_judge(&r, BFS_S3RESP_NET_FATAL, false,
					  "SSL certificate problem", &c, &err, why, sizeof(why)),
			 BFS_S3RESP_FAIL);
	ck_assert_int_eq(err, -EIO);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("s3");
	TCase *sign = tcase_create("sign"), *url = tcase_create("url"),
	      *conf = tcase_create("config"), *xml = tcase_create("xml"),
	      *resp = tcase_create("response");
	SRunner *sr;
	int failed;

	tcase_add_test(sign, aws_doc_get_object_example_signs_as_documented);
	tcase_add_test(sign, aws_doc_list_objects_example_signs_as_documented);
	tcase_add_test(sign, aws_doc_lifecycle_example_signs_an_empty_value_as_documented);
	tcase_add_test(sign, a_session_token_is_sent_and_signed);
	tcase_add_test(sign, header_values_are_trimmed_and_names_lowered_and_sorted);
	tcase_add_test(sign, the_signer_refuses_what_it_cannot_sign);
	tcase_add_test(sign, paths_keep_slashes_and_query_values_encode_them);
	tcase_add_test(sign, the_query_is_sorted_by_encoded_name_then_value);
	tcase_add_test(url, urls_parse_into_bucket_key_and_listing_prefix);
	tcase_add_test(url, bad_urls_are_refused_with_a_reason);
	tcase_add_test(url, listed_keys_match_the_source_as_a_directory_or_glob_would);
	tcase_add_test(url, aws_is_virtual_hosted_and_custom_endpoints_path_style);
	tcase_add_checked_fixture(conf, NULL, drop_home);
	tcase_add_test(conf, environment_credentials_region_and_endpoint_are_used);
	tcase_add_test(conf, options_come_before_the_environment);
	tcase_add_test(conf, the_profile_files_give_credentials_region_and_endpoint);
	tcase_add_test(conf, the_file_variables_move_the_profile_files);
	tcase_add_test(conf, missing_or_unusable_credentials_say_what_to_do);
	tcase_add_test(conf, gs_urls_go_to_google_path_style_in_region_auto);
	tcase_add_test(conf, the_description_names_no_secret);
	tcase_add_test(xml, a_listing_page_gives_keys_sizes_etags_and_the_token);
	tcase_add_test(xml, url_encoded_keys_are_decoded);
	tcase_add_test(xml, bad_listings_are_refused_with_a_reason);
	tcase_add_test(xml, error_documents_give_code_message_and_region);
	tcase_add_checked_fixture(resp, NULL, drop_home);
	tcase_add_test(resp, backoff_doubles_with_jitter_up_to_its_cap);
	tcase_add_test(resp, the_retry_budget_is_the_documented_one);
	tcase_add_test(resp, messages_lose_secrets_and_line_breaks);
	tcase_add_test(resp, a_ranged_read_is_checked_against_its_range_and_etag);
	tcase_add_test(resp, error_statuses_map_to_errno_and_transient_ones_retry);
	tcase_add_test(resp, transport_failures_retry_and_unreachable_endpoints_are_named);
	suite_add_tcase(s, sign);
	suite_add_tcase(s, url);
	suite_add_tcase(s, conf);
	suite_add_tcase(s, xml);
	suite_add_tcase(s, resp);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
