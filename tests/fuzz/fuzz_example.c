/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_example.c — fuzz target for the example decoder and the schema code
 * that consumes its output.
 *
 * bfs_fuzz_example() decodes the input as one record and, split at a point
 * taken from its first byte, as two more; prints each as text; infers a
 * schema from those that decode; writes it as JSON and reads it back (must
 * succeed); and checks every added record against the inferred schema (must
 * fit). Any broken invariant aborts. Built with -DBFS_LIBFUZZER it is also a
 * libFuzzer target; tests/fuzz/fuzz_replay.c replays the corpus under gcc.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decodertest.h"
#include "example.h"
#include "schema.h"

int bfs_fuzz_example(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_example: %s:%d: %s (%s)\n", __FILE__, __LINE__,      \
				#cond, bfs_err_msg());                                             \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int bfs_fuzz_example(const uint8_t *data, size_t size)
{
	struct bfs_example *ex[3] = { NULL, NULL, NULL };
	bool added[3] = { false, false, false };
	struct bfs_infer *inf = NULL;
	struct bfs_schema *s = NULL, *back = NULL;
	char *text = NULL;
	size_t split;

	if (bfs_example_decode(&ex[0], data, size) < 0)
		ex[0] = NULL;
	if (size > 1) {
		split = 1 + (size_t)data[0] % size;
		if (split > size)
			split = size;
		if (bfs_example_decode(&ex[1], data + 1, split - 1) < 0)
			ex[1] = NULL;
		if (bfs_example_decode(&ex[2], data + split, size - split) < 0)
			ex[2] = NULL;
	}

	FUZZ_ASSERT(bfs_infer_new(&inf) == 0);
	for (int i = 0; i < 3; i++) {
		if (!ex[i])
			continue;
		FUZZ_ASSERT(bfs_example_to_text(&text, ex[i], (size_t)i * 3) == 0);
		free(text);
		text = NULL;
		for (size_t j = 0; j < ex[i]->nfeatures; j++) {
			FUZZ_ASSERT(bfs_example_find(ex[i], ex[i]->features[j].name) ==
				    &ex[i]->features[j].v);
			if (j)
				FUZZ_ASSERT(strcmp(ex[i]->features[j - 1].name,
						   ex[i]->features[j].name) < 0);
		}
		for (size_t j = 0; j < ex[i]->nlists; j++)
			FUZZ_ASSERT(bfs_example_find_list(ex[i], ex[i]->lists[j].name) ==
				    &ex[i]->lists[j]);
		added[i] = bfs_infer_add(inf, ex[i]) == 0;
	}
	FUZZ_ASSERT(bfs_infer_finish(&s, inf) == 0 || s == NULL);
	if (s) {
		FUZZ_ASSERT(bfs_schema_to_json(&text, s, NULL) == 0);
		FUZZ_ASSERT(bfs_schema_from_json(&back, text, strlen(text)) == 0);
		FUZZ_ASSERT(back->nfeatures == s->nfeatures && back->nlists == s->nlists);
		for (int i = 0; i < 3; i++) {
			if (!added[i])
				continue;
			FUZZ_ASSERT(test_schema_check(s, ex[i]) == 0);
			FUZZ_ASSERT(test_schema_check(back, ex[i]) == 0);
			for (size_t j = 0; j < s->nfeatures; j++) {
				uint64_t nv, nb;
				bfs_spec_ragged_counts(&s->features[j], ex[i], &nv, &nb);
				(void)bfs_spec_elems(&s->features[j]);
			}
		}
		free(text);
	}
	bfs_schema_free(back);
	bfs_schema_free(s);
	bfs_infer_free(inf);
	for (int i = 0; i < 3; i++)
		bfs_example_free(ex[i]);
	return 0;
}

#ifdef BFS_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return bfs_fuzz_example(data, size);
}
#endif
