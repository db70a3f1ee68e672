/* SPDX-License-Identifier: Apache-2.0 */
/* cjson.c — the cloud unit's JSON, over jansson (its one user in cloud/):
 * see cjson.h. */
#include "cjson.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bfs_cjson {
	json_t *root; /* an object */
};

int bfs_cjson_parse(struct bfs_cjson **out, const char *text, size_t n, unsigned flags,
		    const char *what, char *why, size_t cap)
{
	json_error_t jerr;
	json_t *root;

	*out = NULL;
	/* jerr.text may quote the document (a secret): only where it is */
	root = json_loadb(text ? text : "", text ? n : 0,
			  (flags & BFS_CJSON_NO_DUPLICATES) ? JSON_REJECT_DUPLICATES : 0, &jerr);
	if (!root) {
		if (json_error_code(&jerr) == json_error_out_of_memory) {
			snprintf(why, cap, "out of memory");
			return -ENOMEM;
		}
		snprintf(why, cap, "%s: not JSON (line %d, column %d)", what, jerr.line,
			 jerr.column);
		return -EBADMSG;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		snprintf(why, cap, "%s: not a JSON object", what);
		return -EBADMSG;
	}
	*out = malloc(sizeof(**out));
	if (!*out) {
		json_decref(root);
		snprintf(why, cap, "out of memory");
		return -ENOMEM;
	}
	(*out)->root = root;
	return 0;
}

void bfs_cjson_free(struct bfs_cjson *o)
{
	if (!o)
		return;
	json_decref(o->root);
	free(o);
}

bool bfs_cjson_has(const struct bfs_cjson *o, const char *key)
{
	json_t *v = json_object_get(o->root, key);

	return v && !json_is_null(v);
}

const char *bfs_cjson_str(const struct bfs_cjson *o, const char *key, size_t *len)
{
	json_t *v = json_object_get(o->root, key);

	if (!json_is_string(v))
		return NULL;
	if (len)
		*len = json_string_length(v);
	return json_string_value(v);
}

void bfs_cjson_wipe(struct bfs_cjson *o, const char *key)
{
	json_t *v = json_object_get(o->root, key);

	if (json_is_string(v))
		explicit_bzero((char *)json_string_value(v), json_string_length(v));
}

int bfs_cjson_int(const struct bfs_cjson *o, const char *key, int64_t *v)
{
	json_t *j = json_object_get(o->root, key);

	if (!j || json_is_null(j))
		return -ENOENT;
	if (!json_is_integer(j))
		return -EINVAL;
	*v = (int64_t)json_integer_value(j);
	return 0;
}

int bfs_cjson_number(const struct bfs_cjson *o, const char *key, int64_t *v)
{
	json_t *j = json_object_get(o->root, key);
	double r;

	if (!json_is_real(j))
		return bfs_cjson_int(o, key, v);
	r = json_real_value(j); /* jansson reads no NaN or infinity */
	if (r >= 9223372036854775807.0)
		*v = INT64_MAX;
	else if (r <= -9223372036854775808.0)
		*v = INT64_MIN;
	else
		*v = (int64_t)r;
	return 0;
}

int bfs_cjson_object_text(char **out, const struct bfs_cjson_member *m, size_t n)
{
	json_t *o = json_object();
	int rc = -ENOMEM;

	*out = NULL;
	if (!o)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		json_t *v;

		if (m[i].str) {
			v = json_string(m[i].str); /* NULL for text that is not UTF-8 */
			if (!v) {
				rc = -EINVAL;
				goto out;
			}
		} else {
			v = json_integer((json_int_t)m[i].num);
			if (!v)
				goto out;
		}
		if (json_object_set_new(o, m[i].key, v)) {
			rc = -EINVAL; /* the key is not UTF-8 */
			goto out;
		}
	}
	*out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	rc = *out ? 0 : -ENOMEM;
out:
	json_decref(o);
	return rc;
}
