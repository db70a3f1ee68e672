/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_wire.c — differential fuzz target: the fast wire decoder (wire.c)
 * against the protobuf-c reference (example.c).
 *
 * Wherever the fast decoder accepts an input, the reference must accept it
 * too and give the same names, kinds and values; the fast decoder may only
 * fail with -EAGAIN (left to the reference) or -ENOMEM. Bound decoding (the
 * batch builder's, bfs_example_bind) is held to the reference the same way
 * (tests/common/bind_diff.h). Anything else aborts.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bind_diff.h"
#include "decodertest.h"
#include "example.h"

int bfs_fuzz_wire(const uint8_t *data, size_t size);

int bfs_fuzz_wire(const uint8_t *data, size_t size)
{
	struct bfs_example *fast = NULL, *ref = NULL;
	int rf = bfs_example_decode_fast(&fast, data, size);
	int rr = bfs_example_decode_ref(&ref, data, size);

	if (rf != 0 && rf != -EAGAIN && rf != -ENOMEM) {
		fprintf(stderr, "fuzz_wire: fast decoder failed with %d (%s)\n", rf, bfs_err_msg());
		abort();
	}
	if (rf == 0 && rr != 0) {
		fprintf(stderr, "fuzz_wire: fast accepted what the reference rejects (%s)\n",
			bfs_err_msg());
		abort();
	}
	if (rf == 0 && !test_example_equal(fast, ref)) {
		fprintf(stderr, "fuzz_wire: fast and reference decode differently\n");
		abort();
	}
	bfs_example_free(fast);
	bfs_example_free(ref);
	{
		const char *bad = bind_diff(data, size);
		if (bad) {
			fprintf(stderr, "fuzz_wire: %s\n", bad);
			abort();
		}
	}
	return 0;
}

#ifdef BFS_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return bfs_fuzz_wire(data, size);
}
#endif
