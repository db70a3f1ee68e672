/* SPDX-License-Identifier: Apache-2.0 */
/* s3xml.c — ListObjectsV2 pages, S3 error documents and STS answers,
 * through expat (the one file that includes it). See s3xml.h. */
#include "s3xml.h"

#include "s3str.h"

#include <expat.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum doc_kind { DOC_LIST, DOC_ERROR, DOC_STS };

enum field {
	F_NONE = 0,
	F_KEY,
	F_SIZE,
	F_ETAG,
	F_TRUNCATED,
	F_TOKEN,
	F_ENCODING,
	F_CODE,
	F_MESSAGE,
	F_REGION,
	F_ENDPOINT,
	F_STS_KEY,
	F_STS_SECRET,
	F_STS_TOKEN,
	F_STS_EXPIRATION,
	F_STS_ARN,
	F_STS_CODE,
	F_STS_MESSAGE,
};

struct parse {
	XML_Parser xp;
	enum doc_kind kind;
	int depth;
	bool root_seen;
	enum field field; /* the element whose text is gathered, at field_depth */
	int field_depth;
	struct bfs_s3_str text;
	int err;
	char why[200];
	/* a listing */
	struct bfs_s3xml_list *l;
	size_t page_start;
	bool in_contents;
	struct bfs_s3_object cur;
	bool have_key, have_size, have_etag;
	bool have_truncated, truncated, encoding_url;
	char *token;
	struct bfs_s3xml_error *e; /* an error */
	struct bfs_s3xml_sts *sts; /* an STS answer */
	bool have_code; /* an error */
	bool in_creds, in_user, in_error; /* an STS answer */
};

__attribute__((format(printf, 3, 4))) static void fail(struct parse *s, int err, const char *fmt,
						       ...)
{
	va_list ap;

	if (s->err)
		return;
	s->err = err;
	va_start(ap, fmt);
	vsnprintf(s->why, sizeof(s->why), fmt, ap);
	va_end(ap);
	XML_StopParser(s->xp, XML_FALSE);
}

/* The name without a namespace prefix. */
static const char *local_name(const char *name)
{
	const char *c = strrchr(name, ':');

	return c ? c + 1 : name;
}

static void reset_object(struct parse *s)
{
	bfs_s3_object_destroy(&s->cur);
	s->have_key = s->have_size = s->have_etag = false;
}

static void start_list_elem(struct parse *s, const char *n)
{
	if (s->depth == 2) {
		if (strcmp(n, "Contents") == 0) {
			reset_object(s);
			s->in_contents = true;
		} else if (strcmp(n, "IsTruncated") == 0) {
			s->field = F_TRUNCATED;
		} else if (strcmp(n, "NextContinuationToken") == 0) {
			s->field = F_TOKEN;
		} else if (strcmp(n, "EncodingType") == 0) {
			s->field = F_ENCODING;
		}
	} else if (s->depth == 3 && s->in_contents) {
		if (strcmp(n, "Key") == 0)
			s->field = F_KEY;
		else if (strcmp(n, "Size") == 0)
			s->field = F_SIZE;
		else if (strcmp(n, "ETag") == 0)
			s->field = F_ETAG;
	}
}

static void start_error_elem(struct parse *s, const char *n)
{
	if (s->depth != 2)
		return;
	if (strcmp(n, "Code") == 0)
		s->field = F_CODE;
	else if (strcmp(n, "Message") == 0)
		s->field = F_MESSAGE;
	else if (strcmp(n, "Region") == 0)
		s->field = F_REGION;
	else if (strcmp(n, "Endpoint") == 0)
		s->field = F_ENDPOINT;
}

static void start_sts_elem(struct parse *s, const char *n)
{
	if (s->depth == 2) {
		s->in_error = strcmp(n, "Error") == 0;
	} else if (s->depth == 3 && !s->in_error) {
		s->in_creds = strcmp(n, "Credentials") == 0;
		s->in_user = strcmp(n, "AssumedRoleUser") == 0;
	} else if (s->depth == 3 && s->in_error) {
		if (strcmp(n, "Code") == 0)
			s->field = F_STS_CODE;
		else if (strcmp(n, "Message") == 0)
			s->field = F_STS_MESSAGE;
	} else if (s->depth == 4 && s->in_creds) {
		if (strcmp(n, "AccessKeyId") == 0)
			s->field = F_STS_KEY;
		else if (strcmp(n, "SecretAccessKey") == 0)
			s->field = F_STS_SECRET;
		else if (strcmp(n, "SessionToken") == 0)
			s->field = F_STS_TOKEN;
		else if (strcmp(n, "Expiration") == 0)
			s->field = F_STS_EXPIRATION;
	} else if (s->depth == 4 && s->in_user && strcmp(n, "Arn") == 0) {
		s->field = F_STS_ARN;
	}
}

static bool sts_root(struct parse *s, const char *n)
{
	if (strcmp(n, "ErrorResponse") == 0) {
		s->sts->is_error = true;
		return true;
	}
	return strcmp(n, "AssumeRoleResponse") == 0 ||
	       strcmp(n, "AssumeRoleWithWebIdentityResponse") == 0;
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **atts)
{
	struct parse *s = ud;
	const char *n = local_name(name);

	(void)atts;
	if (s->err)
		return;
	if (++s->depth > BFS_S3XML_MAX_DEPTH) {
		fail(s, -EBADMSG, "elements nested deeper than %d", BFS_S3XML_MAX_DEPTH);
		return;
	}
	if (s->depth == 1 && s->kind == DOC_STS) {
		if (!sts_root(s, n)) {
			fail(s, -EBADMSG, "the root element is <%.40s>, not an STS answer", n);
			return;
		}
		s->root_seen = true;
		return;
	}
	if (s->depth == 1) {
		const char *want = s->kind == DOC_LIST ? "ListBucketResult" : "Error";

		if (strcmp(n, want) != 0) {
			fail(s, -EBADMSG, "the root element is <%.40s>, not <%s>", n, want);
			return;
		}
		s->root_seen = true;
		return;
	}
	if (s->field != F_NONE)
		return; /* an element inside a field's: its text is not the field's */
	if (s->kind == DOC_LIST)
		start_list_elem(s, n);
	else if (s->kind == DOC_STS)
		start_sts_elem(s, n);
	else
		start_error_elem(s, n);
	if (s->field != F_NONE) {
		s->field_depth = s->depth;
		s->text.n = 0;
		if (s->text.p)
			s->text.p[0] = '\0';
	}
}

static void XMLCALL on_text(void *ud, const XML_Char *p, int len)
{
	struct parse *s = ud;

	if (s->err || s->field == F_NONE || s->depth != s->field_depth || len <= 0)
		return;
	if (s->kind == DOC_ERROR) {
		/* error fields are truncated to fit, never refused */
		size_t room = s->text.n < 512 ? 512 - s->text.n : 0;
		bfs_s3_str_add(&s->text, p, (size_t)len < room ? (size_t)len : room);
	} else if (s->text.n + (size_t)len > BFS_S3XML_MAX_TEXT) {
		fail(s, -EBADMSG, "an element's text is longer than %d bytes", BFS_S3XML_MAX_TEXT);
		return;
	} else {
		bfs_s3_str_add(&s->text, p, (size_t)len);
	}
	if (s->text.err)
		fail(s, s->text.err, "out of memory");
}

static const char *text_of(struct parse *s)
{
	return s->text.p ? s->text.p : "";
}

static bool parse_u64(const char *t, uint64_t *out)
{
	uint64_t v = 0;

	if (!*t)
		return false;
	for (; *t; t++) {
		if (*t < '0' || *t > '9' || __builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*t - '0'), &v))
			return false;
	}
	*out = v;
	return true;
}

static int dup_text(struct parse *s, char **dst)
{
	char *p = strdup(text_of(s));

	if (!p) {
		fail(s, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	free(*dst);
	*dst = p;
	return 0;
}

static void end_contents(struct parse *s)
{
	struct bfs_s3xml_list *l = s->l;

	if (!s->have_key || !s->have_size) {
		fail(s, -EBADMSG, "a <Contents> without %s", s->have_key ? "<Size>" : "<Key>");
		return;
	}
	if (!s->have_etag && !(s->cur.etag = strdup(""))) {
		fail(s, -ENOMEM, "out of memory");
		return;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct bfs_s3_object *v;

		if (cap > SIZE_MAX / sizeof(*v) || !(v = realloc(l->objs, cap * sizeof(*v)))) {
			fail(s, -ENOMEM, "out of memory");
			return;
		}
		l->objs = v;
		l->cap = cap;
	}
	l->objs[l->n++] = s->cur;
	memset(&s->cur, 0, sizeof(s->cur));
	s->have_key = s->have_size = s->have_etag = false;
	s->in_contents = false;
}

static void end_list_field(struct parse *s)
{
	const char *t = text_of(s);

	switch (s->field) {
	case F_KEY:
		if (s->have_key) {
			fail(s, -EBADMSG, "a <Contents> with two <Key>");
			return;
		}
		if (!*t) {
			fail(s, -EBADMSG, "an empty <Key>");
			return;
		}
		if (dup_text(s, &s->cur.key) == 0)
			s->have_key = true;
		break;
	case F_SIZE:
		if (s->have_size || !parse_u64(t, &s->cur.size)) {
			fail(s, -EBADMSG, "a bad <Size> '%.32s'", t);
			return;
		}
		s->have_size = true;
		break;
	case F_ETAG:
		if (s->have_etag || s->text.n >= BFS_S3_ETAG_MAX) {
			fail(s, -EBADMSG, "a bad <ETag>");
			return;
		}
		if (dup_text(s, &s->cur.etag) == 0)
			s->have_etag = true;
		break;
	case F_TRUNCATED:
		if (strcmp(t, "true") == 0) {
			s->truncated = true;
		} else if (strcmp(t, "false") == 0) {
			s->truncated = false;
		} else {
			fail(s, -EBADMSG, "a bad <IsTruncated> '%.16s'", t);
			return;
		}
		s->have_truncated = true;
		break;
	case F_TOKEN:
		dup_text(s, &s->token);
		break;
	case F_ENCODING:
		s->encoding_url = strcmp(t, "url") == 0;
		break;
	default:
		break;
	}
}

static void copy_field(char *dst, size_t cap, const char *t)
{
	snprintf(dst, cap, "%s", t);
}

static void end_error_field(struct parse *s)
{
	const char *t = text_of(s);

	switch (s->field) {
	case F_CODE:
		copy_field(s->e->code, sizeof(s->e->code), t);
		s->have_code = *t != '\0';
		break;
	case F_MESSAGE:
		copy_field(s->e->message, sizeof(s->e->message), t);
		break;
	case F_REGION:
		copy_field(s->e->region, sizeof(s->e->region), t);
		break;
	case F_ENDPOINT:
		copy_field(s->e->endpoint, sizeof(s->e->endpoint), t);
		break;
	default:
		break;
	}
}

static void end_sts_field(struct parse *s)
{
	struct bfs_s3xml_sts *o = s->sts;
	char **dst = NULL;

	switch (s->field) {
	case F_STS_KEY:
		dst = &o->key_id;
		break;
	case F_STS_SECRET:
		dst = &o->secret;
		break;
	case F_STS_TOKEN:
		dst = &o->token;
		break;
	case F_STS_EXPIRATION:
		dst = &o->expiration;
		break;
	case F_STS_ARN:
		dst = &o->arn;
		break;
	case F_STS_CODE:
		copy_field(o->code, sizeof(o->code), text_of(s));
		return;
	case F_STS_MESSAGE:
		copy_field(o->message, sizeof(o->message), text_of(s));
		return;
	default:
		return;
	}
	if (*dst) {
		fail(s, -EBADMSG, "an element given twice in <Credentials> or <AssumedRoleUser>");
		return;
	}
	*dst = strdup(text_of(s));
	if (!*dst)
		fail(s, -ENOMEM, "out of memory");
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
	struct parse *s = ud;

	if (s->err)
		return;
	if (s->field != F_NONE && s->depth == s->field_depth) {
		if (s->kind == DOC_LIST)
			end_list_field(s);
		else if (s->kind == DOC_STS)
			end_sts_field(s);
		else
			end_error_field(s);
		s->field = F_NONE;
	} else if (s->kind == DOC_LIST && s->depth == 2 && s->in_contents &&
		   strcmp(local_name(name), "Contents") == 0) {
		end_contents(s);
	}
	s->depth--;
}

static void XMLCALL on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
			       const XML_Char *pubid, int has_internal_subset)
{
	(void)name;
	(void)sysid;
	(void)pubid;
	(void)has_internal_subset;
	fail(ud, -EBADMSG, "a DOCTYPE (no store sends one)");
}

static int run(struct parse *s, const char *xml, size_t len)
{
	int rc = 0;

	if (len > INT_MAX) {
		snprintf(s->why, sizeof(s->why), "a document of %zu bytes", len);
		return -EBADMSG;
	}
	s->xp = XML_ParserCreate(NULL);
	if (!s->xp)
		return -ENOMEM;
	XML_SetUserData(s->xp, s);
	XML_SetElementHandler(s->xp, on_start, on_end);
	XML_SetCharacterDataHandler(s->xp, on_text);
	XML_SetStartDoctypeDeclHandler(s->xp, on_doctype);
	if (XML_Parse(s->xp, xml, (int)len, XML_TRUE) != XML_STATUS_OK && !s->err) {
		enum XML_Error code = XML_GetErrorCode(s->xp);

		s->err = code == XML_ERROR_NO_MEMORY ? -ENOMEM : -EBADMSG;
		snprintf(s->why, sizeof(s->why), "not XML: %s at line %lu column %lu",
			 XML_ErrorString(code), (unsigned long)XML_GetCurrentLineNumber(s->xp),
			 (unsigned long)XML_GetCurrentColumnNumber(s->xp));
	}
	if (!s->err && !s->root_seen)
		fail(s, -EBADMSG, "an empty document");
	rc = s->err;
	XML_ParserFree(s->xp);
	s->xp = NULL;
	if (s->text.p) /* it may have held a secret (STS) */
		explicit_bzero(s->text.p, s->text.cap);
	bfs_s3_str_free(&s->text);
	return rc;
}

bool bfs_s3xml_url_decode(char *s)
{
	char *w = s;

	for (const char *r = s; *r; r++) {
		if (*r == '+') {
			*w++ = ' ';
		} else if (*r == '%') {
			int v = 0;

			for (int i = 1; i <= 2; i++) {
				char c = r[i];

				v <<= 4;
				if (c >= '0' && c <= '9')
					v |= c - '0';
				else if (c >= 'a' && c <= 'f')
					v |= c - 'a' + 10;
				else if (c >= 'A' && c <= 'F')
					v |= c - 'A' + 10;
				else
					return false;
			}
			if (v == 0)
				return false;
			*w++ = (char)v;
			r += 2;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
	return true;
}

int bfs_s3xml_parse_list(struct bfs_s3xml_list *l, const char *xml, size_t len, char *why,
			 size_t whycap)
{
	struct parse s = { .kind = DOC_LIST, .l = l, .page_start = l->n };
	int rc = run(&s, xml, len);

	if (rc == 0 && s.have_truncated && s.truncated && (!s.token || !*s.token)) {
		rc = -EBADMSG;
		snprintf(s.why, sizeof(s.why),
			 "IsTruncated is true, with no NextContinuationToken");
	}
	for (size_t i = s.page_start; rc == 0 && i < l->n; i++) {
		char *k = l->objs[i].key;

		if (s.encoding_url && !bfs_s3xml_url_decode(k)) {
			rc = -EBADMSG;
			snprintf(s.why, sizeof(s.why), "a key with a bad %%-escape");
		} else if (!*k || strlen(k) > BFS_S3XML_MAX_KEY) {
			rc = -EBADMSG;
			snprintf(s.why, sizeof(s.why), "a key of %zu bytes", strlen(k));
		}
	}
	bfs_s3_object_destroy(&s.cur);
	if (rc == 0) {
		free(l->next_token);
		l->next_token = s.truncated ? s.token : NULL;
		if (!s.truncated)
			free(s.token);
		l->truncated = s.truncated;
		l->page_keys = l->n - s.page_start;
	} else {
		free(s.token);
		if (why && whycap)
			snprintf(why, whycap, "%s", s.why);
	}
	return rc;
}

void bfs_s3xml_list_destroy(struct bfs_s3xml_list *l)
{
	bfs_s3_objects_free(l->objs, l->n);
	free(l->next_token);
	memset(l, 0, sizeof(*l));
}

int bfs_s3xml_parse_error(struct bfs_s3xml_error *e, const char *xml, size_t len)
{
	struct parse s = { .kind = DOC_ERROR, .e = e };
	int rc;

	memset(e, 0, sizeof(*e));
	rc = run(&s, xml, len);
	if (rc == 0 && !s.have_code)
		rc = -EBADMSG;
	if (rc)
		memset(e, 0, sizeof(*e));
	return rc;
}

static void free_wiped(char **p)
{
	if (*p) {
		explicit_bzero(*p, strlen(*p));
		free(*p);
		*p = NULL;
	}
}

void bfs_s3xml_sts_destroy(struct bfs_s3xml_sts *o)
{
	if (!o)
		return;
	free(o->key_id);
	free_wiped(&o->secret);
	free_wiped(&o->token);
	free(o->expiration);
	free(o->arn);
	memset(o, 0, sizeof(*o));
}

int bfs_s3xml_parse_sts(struct bfs_s3xml_sts *o, const char *xml, size_t len, char *why,
			size_t whycap)
{
	struct parse s = { .kind = DOC_STS, .sts = o };
	int rc;

	memset(o, 0, sizeof(*o));
	rc = run(&s, xml, len);
	if (rc == 0 && o->is_error && !o->code[0]) {
		rc = -EBADMSG;
		snprintf(s.why, sizeof(s.why), "an <ErrorResponse> without a <Code>");
	} else if (rc == 0 && !o->is_error &&
		   (!o->key_id || !*o->key_id || !o->secret || !*o->secret || !o->token ||
		    !*o->token || !o->expiration || !*o->expiration)) {
		rc = -EBADMSG;
		snprintf(s.why, sizeof(s.why),
			 "<Credentials> without an AccessKeyId, SecretAccessKey, SessionToken or "
			 "Expiration");
	}
	if (rc) {
		bfs_s3xml_sts_destroy(o);
		if (why && whycap)
			snprintf(why, whycap, "%s", s.why);
	}
	return rc;
}
