#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""How random is shuffle=block next to shuffle=global? (docs/shuffle.md,
section 5)

    scripts/shuffle_quality.py [--records N] [--record-bytes R]
                               [--block-size S] [--window W] [--batch B]

Computes both epoch orders with the independent oracle
(tests/integration/oracle.py) for N records of R bytes each (data + 16
framing) in one shard, and prints, for each order:
  - the distance between neighbours' original positions |P(p+1) - P(p)|
    (median, 10th percentile, as a fraction of N),
  - how many distinct source blocks a batch of B rows draws from (mean),
  - the share of neighbours from the same block,
  - how many blocks the first window's worth of rows (window x records per
    block) reads from: block holds it to `window`; global reads nearly all.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import oracle  # noqa: E402


def stats(order, n, per_block, batch, window):
    d = np.abs(np.diff(order))
    blk = order // per_block
    span = per_block * window
    nb = n // batch
    distinct = np.mean([len(np.unique(blk[i * batch:(i + 1) * batch])) for i in range(nb)])
    return {
        "median |P(p+1)-P(p)| / N": np.median(d) / n,
        "p10 |P(p+1)-P(p)| / N": np.percentile(d, 10) / n,
        "distinct blocks per batch": distinct,
        "neighbours from one block": float(np.mean(blk[1:] == blk[:-1])),
        "blocks read by the first window's rows": len(np.unique(blk[:span])),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1 << 20)
    ap.add_argument("--record-bytes", type=int, default=100)
    ap.add_argument("--block-size", type=int, default=64 << 10)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    n = a.records
    lens = [a.record_bytes - 16] * n
    per_block = a.block_size // a.record_bytes
    glob = oracle.perm(n, a.seed, 0)
    block = oracle.block_perm(lens, [n], a.block_size, a.window, a.seed, 0)
    assert sorted(block.tolist()) == list(range(n))
    rows = [("global", stats(glob, n, per_block, a.batch, a.window)),
            ("block", stats(block, n, per_block, a.batch, a.window))]
    print("N=%d records of %d bytes, block_size=%d (%d records), window=%d (%d records), B=%d"
          % (n, a.record_bytes, a.block_size, per_block, a.window, per_block * a.window,
             a.batch))
    keys = list(rows[0][1])
    print("| measure | global | block |")
    print("|---|---|---|")
    for k in keys:
        print("| %s | %.4g | %.4g |" % (k, rows[0][1][k], rows[1][1][k]))


if __name__ == "__main__":
    main()
