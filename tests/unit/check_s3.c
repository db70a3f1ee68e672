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

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
