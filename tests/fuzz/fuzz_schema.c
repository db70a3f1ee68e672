/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_schema.c — fuzz target for schema JSON parsing and what follows it.
 *
 * bfs_fuzz_schema() parses the input as a schema; if that works, writes it
 * back as JSON, which must parse again to an equal JSON text; clones it,
 * selects a fixed list of names and the first feature's name, and counts a
 * fixed record's ragged values under it (a record against a schema in
 * full is the batch's fill: fuzz_batch). Any broken invariant aborts. Built with
 * -DBFS_LIBFUZZER it is also a libFuzzer target; tests/fuzz/fuzz_replay.c
 * replays the corpus under gcc.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example.h"
#include "schema.h"

int bfs_fuzz_schema(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_schema: %s:%d: %s (%s)\n", __FILE__, __LINE__,       \
				#cond, bfs_err_msg());                                             \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* SequenceExample{context{label: int64 [3], x: float [1, 2], image/encoded:
 * bytes ["abcd"]}, feature_lists{frames: [float [1, 2, 3]]}} */
static const uint8_t fixed_record[] = {
	0x0a, 0x3e, 0x0a, 0x0e, 0x0a, 0x05, 0x6c, 0x61, 0x62, 0x65, 0x6c, 0x12, 0x05, 0x1a,
	0x03, 0x0a, 0x01, 0x03, 0x0a, 0x11, 0x0a, 0x01, 0x78, 0x12, 0x0c, 0x12, 0x0a, 0x0a,
	0x08, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x0a, 0x19, 0x0a, 0x0d, 0x69,
	0x6d, 0x61, 0x67, 0x65, 0x2f, 0x65, 0x6e, 0x63, 0x6f, 0x64, 0x65, 0x64, 0x12, 0x08,
	0x0a, 0x06, 0x0a, 0x04, 0x61, 0x62, 0x63, 0x64, 0x12, 0x1e, 0x0a, 0x1c, 0x0a, 0x06,
	0x66, 0x72, 0x61, 0x6d, 0x65, 0x73, 0x12, 0x12, 0x0a, 0x10, 0x12, 0x0e, 0x0a, 0x0c,
	0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x40, 0x40,
};

int bfs_fuzz_schema(const uint8_t *data, size_t size)
{
	struct bfs_schema *s = NULL, *back = NULL, *c = NULL;
	struct bfs_example *ex = NULL;
	char *text = NULL, *text2 = NULL;

	if (bfs_schema_from_json(&s, (const char *)data, size) < 0)
		return 0;
	FUZZ_ASSERT(bfs_schema_to_json(&text, s, NULL) == 0);
	FUZZ_ASSERT(bfs_schema_from_json(&back, text, strlen(text)) == 0);
	FUZZ_ASSERT(bfs_schema_to_json(&text2, back, NULL) == 0);
	FUZZ_ASSERT(strcmp(text, text2) == 0);

	/* a fixed record's counts; any result but a crash is fine */
	if (bfs_example_decode(&ex, fixed_record, sizeof(fixed_record)) == 0) {
		uint64_t nv, nb;
		for (size_t i = 0; i < s->nfeatures; i++) {
			bfs_spec_ragged_counts(&s->features[i], ex, &nv, &nb);
			(void)bfs_spec_elems(&s->features[i]);
		}
		for (size_t i = 0; i < s->nlists; i++)
			(void)bfs_spec_elems(&s->lists[i]);
		bfs_example_free(ex);
	}

	FUZZ_ASSERT(bfs_schema_clone(&c, s) == 0);
	(void)bfs_schema_select(c, "label,feature_lists/frames,image/encoded");
	bfs_schema_free(c);
	c = NULL;
	if (s->nfeatures && !strchr(s->features[0].name, ',')) {
		FUZZ_ASSERT(bfs_schema_clone(&c, s) == 0);
		FUZZ_ASSERT(bfs_schema_select(c, s->features[0].name) == 0);
		/* "feature_lists/x" names a list x first, if there is one */
		FUZZ_ASSERT(c->nfeatures + c->nlists == 1);
		bfs_schema_free(c);
	}
	free(text);
	free(text2);
	bfs_schema_free(back);
	bfs_schema_free(s);
	return 0;
}

#ifdef BFS_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return bfs_fuzz_schema(data, size);
}
#endif
