/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keymap.c — open-addressing hash of a fixed name set (see keymap.h).
 *
 * Linear probing over a power-of-two table at most half full; each slot
 * keeps the name's hash and length so that a probe compares bytes only when
 * both match. The lookup itself is inline in keymap.h.
 */
#include "keymap.h"

#include <stdlib.h>
#include <string.h>

int bfs_keymap_new(struct bfs_keymap **out, const char *const *names, size_t n)
{
	struct bfs_keymap *m = calloc(1, sizeof(*m));
	size_t size = 8;

	if (!m)
		return -ENOMEM;
	while (size < 2 * n)
		size <<= 1;
	m->t = calloc(size, sizeof(*m->t));
	if (!m->t) {
		free(m);
		return -ENOMEM;
	}
	m->mask = size - 1;
	m->n = n;
	m->slot_of = calloc(n ? n : 1, sizeof(size_t));
	if (!m->slot_of) {
		bfs_keymap_free(m);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(names[i]);
		uint64_t h = bfs_keymap_hash((const uint8_t *)names[i], len);
		size_t k = (size_t)h & m->mask;

		while (m->t[k].name) {
			if (m->t[k].hash == h && m->t[k].len == len &&
			    memcmp(m->t[k].name, names[i], len) == 0)
				break; /* a repeated name keeps its first index */
			k = (k + 1) & m->mask;
		}
		if (m->t[k].name) {
			m->slot_of[i] = k;
			continue;
		}
		m->t[k] = (struct bfs_keymap_slot){
			h, len <= 8 ? bfs_keymap_word((const uint8_t *)names[i], len) : 0, names[i],
			len, (long)i
		};
		m->slot_of[i] = k;
	}
	*out = m;
	return 0;
}

void bfs_keymap_free(struct bfs_keymap *m)
{
	if (!m)
		return;
	free(m->t);
	free(m->slot_of);
	free(m);
}
