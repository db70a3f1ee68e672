# SPDX-License-Identifier: Apache-2.0
"""An independent reference of a mixture's order (docs/shuffle.md, section 8),
written from the documented rule: each weight segment's period laid out by
earliest deadline first, a position's (source, draw) from the period's
prefix counts, each draw through its source's pass permutation, and the
three epoch rules. Pure Python over oracle.perm_at (docs/shuffle.md's P)."""

from math import gcd

import oracle

_M64 = (1 << 64) - 1


def fnv1a(name):
    h = 0xcbf29ce484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001b3) & _M64
    return h


def scaled(w):
    """A weight as an integer number of 10^-9 (rounded to 9 decimals)."""
    return int(round(w * 1e9))


def period(w):
    """One period of a segment with integer weights w (already reduced):
    the source of each of its W positions, earliest deadline first."""
    W, k = sum(w), len(w)
    c = [0] * k
    table = []
    for p in range(W):
        best, best_d = None, None
        for s in range(k):
            if c[s] < w[s] and c[s] * W < (p + 1) * w[s]:
                d = -(-(c[s] + 1) * W // w[s]) - 1
                if best is None or d < best_d:
                    best, best_d = s, d
        assert best is not None and best_d >= p, "the rule missed a deadline"
        table.append(best)
        c[best] += 1
    return table


class Mixture:
    """names, records (per source), schedule [(from_record, [weights])],
    epoch ("first_exhausted", "all_exhausted" or a number), seed, shuffle."""

    def __init__(self, names, records, schedule, epoch="first_exhausted", seed=0,
                 shuffle=True):
        self.names, self.N, self.seed, self.shuffle = names, records, seed, shuffle
        self.k = len(names)
        self.keys = [oracle._mix(seed ^ fnv1a(n)) for n in names]
        self.segs = []
        base = [0] * self.k
        for i, (frm, ws) in enumerate(schedule):
            iw = [scaled(x) for x in ws]
            g = 0
            for x in iw:
                g = gcd(g, x)
            w = [x // g for x in iw]
            table = period(w)
            # prefix[s][p]: draws of s in positions [0, p) of the period
            prefix = []
            for s in range(self.k):
                acc, row = 0, [0]
                for t in table:
                    acc += t == s
                    row.append(acc)
                prefix.append(row)
            if i > 0:
                prev = self.segs[-1]
                base = [self._seg_count(prev, frm - prev["from"], s) for s in range(self.k)]
            self.segs.append({"from": frm, "w": w, "W": sum(w), "table": table,
                              "prefix": prefix, "base": list(base)})
        self.L = self._epoch_len(epoch)

    def _seg_count(self, sg, m, s):
        q, p = divmod(m, sg["W"])
        return sg["base"][s] + q * sg["w"][s] + sg["prefix"][s][p]

    def _seg(self, n):
        sg = self.segs[0]
        for x in self.segs:
            if x["from"] <= n:
                sg = x
        return sg

    def count(self, n, s):
        sg = self._seg(n)
        return self._seg_count(sg, n - sg["from"], s)

    def at(self, n):
        """(source, draw number in that source) of stream position n."""
        sg = self._seg(n)
        q, p = divmod(n - sg["from"], sg["W"])
        s = sg["table"][p]
        return s, sg["base"][s] + q * sg["w"][s] + sg["prefix"][s][p]

    def record(self, n):
        """(source, record index in that source) of stream position n."""
        s, d = self.at(n)
        npass, pos = divmod(d, self.N[s])
        if not self.shuffle:
            return s, pos
        return s, oracle.perm_at(pos, self.N[s], self.keys[s], npass)

    def _epoch_len(self, epoch):
        if isinstance(epoch, int):
            return epoch
        total = sum(self.N)
        if epoch == "first_exhausted":
            lo, hi = 0, total + 1
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if all(self.count(mid, s) <= self.N[s] for s in range(self.k)):
                    lo = mid
                else:
                    hi = mid
            return lo
        assert epoch == "all_exhausted"
        n = 0
        while not all(self.count(n, s) >= self.N[s] for s in range(self.k)):
            n += 1
        return n

    def epoch(self, e):
        """[(source, record)] of every position of epoch e."""
        return [self.record(e * self.L + i) for i in range(self.L)]
