# SPDX-License-Identifier: Apache-2.0
"""An independent reference of a mixture's order (docs/shuffle.md, section 8),
written from the documented rule: each weight segment's weights reduced (or,
when their period does not fit, the smallest period within 10^-6 of their
shares), the period laid out by earliest deadline first, a position's
(source, draw) from the period's prefix counts, each draw through its
source's pass permutation, and the three epoch rules. Pure Python over
oracle.perm_at (docs/shuffle.md's P)."""

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


def fitted(w):
    """8.1: the counts of one period for weights w (integers, reduced): w
    itself when its period fits (at most 2^24 records, and 2^28 / k), else
    the smallest period V whose counts keep every share within 10^-6 of
    w's (each count at least 1): each w_s V / W rounded, halves up, into
    its bounds, then the source furthest below its share gains one (or the
    furthest above loses one) until they sum to V, the lowest index on a
    tie."""
    k, W = len(w), sum(w)
    limit = min(1 << 24, (1 << 28) // k)
    if W <= limit:
        return w
    tol, D = 10**6, W * 10**6
    for V in range(1, limit + 1):
        lo, hi = [], []
        for x in w:
            hi.append(V * (x * tol + W) // D)
            lo.append(max(1, -(-V * (x * tol - W) // D)))
            if lo[-1] > hi[-1]:
                break
        if len(hi) < k or not sum(lo) <= V <= sum(hi):
            continue
        v = [min(max((2 * x * V + W) // (2 * W), a), b) for x, a, b in zip(w, lo, hi)]
        while sum(v) != V:
            up = sum(v) < V
            best = None
            for s in range(k):
                d = (w[s] * V - v[s] * W) * (1 if up else -1)
                if (v[s] < hi[s] if up else v[s] > lo[s]) and (best is None or d > best[0]):
                    best = (d, s)
            v[best[1]] += 1 if up else -1
        return v
    raise ValueError("no period of up to %d records keeps the shares within 10^-6" % limit)


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
            w = fitted([x // g for x in iw])
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
