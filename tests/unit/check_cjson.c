/* SPDX-License-Identifier: Apache-2.0 */
/* check_cjson.c — the cloud unit's JSON (decoder/cloud/cjson.h): objects
 * parsed from bounded buffers with one-line errors that quote no text,
 * string and number members, a secret wiped in place, and the compact
 * text of a flat object (a JWT's header and claims). */
#include "cjson.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct bfs_cjson *parse_ok(const char *text)
{
	struct bfs_cjson *o = NULL;
	char why[256] = "";

	ck_assert_msg(bfs_cjson_parse(&o, text, strlen(text), 0, "doc", why, sizeof(why)) == 0,
		      "%s", why);
	return o;
}

START_TEST(a_bad_document_is_one_line_naming_it_and_where_never_its_text)
{
	struct bfs_cjson *o = (struct bfs_cjson *)1;
	char why[256];

	ck_assert_int_eq(
		bfs_cjson_parse(&o, "{\n \"k\": sekrit}", 15, 0, "/x/key.json", why, sizeof(why)),
		-EBADMSG);
	ck_assert_ptr_null(o);
	ck_assert_ptr_nonnull(strstr(why, "/x/key.json: not JSON (line 2, column "));
	ck_assert_ptr_null(strstr(why, "sekrit"));
	ck_assert_int_eq(bfs_cjson_parse(&o, "[1]", 3, 0, "the answer", why, sizeof(why)),
			 -EBADMSG);
	ck_assert_str_eq(why, "the answer: not a JSON object");
	ck_assert_int_eq(bfs_cjson_parse(&o, NULL, 0, 0, "empty", why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "empty: not JSON"));
	/* a \u0000 in a string is refused: every string is a C string */
	ck_assert_int_eq(
		bfs_cjson_parse(&o, "{\"a\": \"x\\u0000y\"}", 17, 0, "doc", why, sizeof(why)),
		-EBADMSG);
	/* the buffer is bounded: what follows n is not read */
	o = NULL;
	ck_assert_int_eq(bfs_cjson_parse(&o, "{\"a\": 1}garbage", 8, 0, "doc", why, sizeof(why)),
			 0);
	bfs_cjson_free(o);
	/* a key given twice: the last wins, unless the caller refuses it */
	o = parse_ok("{\"a\": \"1\", \"a\": \"2\"}");
	ck_assert_str_eq(bfs_cjson_str(o, "a", NULL), "2");
	bfs_cjson_free(o);
	ck_assert_int_eq(bfs_cjson_parse(&o, "{\"a\": 1, \"a\": 2}", 16, BFS_CJSON_NO_DUPLICATES,
					 "doc", why, sizeof(why)),
			 -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "doc: not JSON (line 1"));
}
END_TEST

START_TEST(members_are_read_by_type_and_a_secret_is_wiped_in_place)
{
	struct bfs_cjson *o = parse_ok("{\"s\": \"ab\", \"n\": null, "
				       "\"i\": 42, \"r\": 2.9, \"big\": 1e300, \"neg\": -1e300, "
				       "\"t\": true, \"secret\": \"hunter2\"}");
	const char *v;
	size_t len = 0;
	int64_t x = 7;

	ck_assert_str_eq(bfs_cjson_str(o, "s", &len), "ab");
	ck_assert_uint_eq(len, 2);
	ck_assert_ptr_null(bfs_cjson_str(o, "i", NULL));
	ck_assert_ptr_null(bfs_cjson_str(o, "missing", NULL));
	ck_assert(bfs_cjson_has(o, "s"));
	ck_assert(!bfs_cjson_has(o, "n"));
	ck_assert(!bfs_cjson_has(o, "missing"));

	ck_assert_int_eq(bfs_cjson_int(o, "i", &x), 0);
	ck_assert_int_eq(x, 42);
	ck_assert_int_eq(bfs_cjson_int(o, "r", &x), -EINVAL);
	ck_assert_int_eq(bfs_cjson_int(o, "s", &x), -EINVAL);
	ck_assert_int_eq(bfs_cjson_int(o, "n", &x), -ENOENT);
	ck_assert_int_eq(bfs_cjson_int(o, "missing", &x), -ENOENT);
	ck_assert_int_eq(bfs_cjson_number(o, "r", &x), 0);
	ck_assert_int_eq(x, 2);
	ck_assert_int_eq(bfs_cjson_number(o, "i", &x), 0);
	ck_assert_int_eq(x, 42);
	ck_assert_int_eq(bfs_cjson_number(o, "big", &x), 0);
	ck_assert(x == INT64_MAX);
	ck_assert_int_eq(bfs_cjson_number(o, "neg", &x), 0);
	ck_assert(x == INT64_MIN);
	ck_assert_int_eq(bfs_cjson_number(o, "t", &x), -EINVAL);
	ck_assert_int_eq(bfs_cjson_number(o, "n", &x), -ENOENT);

	v = bfs_cjson_str(o, "secret", &len);
	bfs_cjson_wipe(o, "secret");
	for (size_t i = 0; i < len; i++)
		ck_assert_int_eq(v[i], 0);
	bfs_cjson_wipe(o, "i"); /* not a string: nothing to wipe */
	bfs_cjson_wipe(o, "missing");
	ck_assert_int_eq(bfs_cjson_int(o, "i", &x), 0);
	ck_assert_int_eq(x, 42);
	bfs_cjson_free(o);
	bfs_cjson_free(NULL);
}
END_TEST

START_TEST(a_flat_object_is_written_compact_in_its_members_order)
{
	const struct bfs_cjson_member m[] = {
		{ "typ", "JWT", 0 },	     { "alg", "RS256", 0 }, { "q", "a\"b\\c/\n", 0 },
		{ "exp", NULL, 1700003600 }, { "neg", NULL, -5 },
	};
	const struct bfs_cjson_member bad[] = { { "iss", "\xff\xfe", 0 } };
	char *t = NULL;

	ck_assert_int_eq(bfs_cjson_object_text(&t, m, 5), 0);
	ck_assert_str_eq(t, "{\"typ\":\"JWT\",\"alg\":\"RS256\",\"q\":\"a\\\"b\\\\c/\\n\","
			    "\"exp\":1700003600,\"neg\":-5}");
	free(t);
	ck_assert_int_eq(bfs_cjson_object_text(&t, m, 0), 0);
	ck_assert_str_eq(t, "{}");
	free(t);
	t = (char *)1;
	ck_assert_int_eq(bfs_cjson_object_text(&t, bad, 1), -EINVAL);
	ck_assert_ptr_null(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cjson");
	TCase *tc = tcase_create("cjson");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, a_bad_document_is_one_line_naming_it_and_where_never_its_text);
	tcase_add_test(tc, members_are_read_by_type_and_a_secret_is_wiped_in_place);
	tcase_add_test(tc, a_flat_object_is_written_compact_in_its_members_order);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
