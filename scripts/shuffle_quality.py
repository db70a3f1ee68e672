#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""How random is shuffle=block next to shuffle=global, with and without
partitions? (docs/shuffle.md, sections 5 and 5.1)

    scripts/shuffle_quality.py [--records N] [--record-bytes R]
                               [--block-size S] [--window W] [--batch B]
                               [--partitions 1,64,1024]

Computes the epoch orders with the independent oracle
(tests/integration/oracle.py) for N records of R bytes each (data + 16
framing) in one shard: the global shuffle, and the block shuffle with each
number of partitions P (P = 1: section 5; P > 1: 5.1, whose epoch leaves
out fewer than P batches' worth of records), and prints, for each order:
  - the distance between neighbours' original positions |P(p+1) - P(p)|
    (median, 10th percentile, as a fraction of N),
  - how many distinct source blocks a batch of B rows draws from (mean),
  - the share of neighbours from the same block,
  - how many blocks the first window's worth of rows (window x records per
    block) reads from: block holds it to `window`; global reads nearly all;
    and the same for rank 0 of a world of P ranks (its own partition);
  - the records an epoch leaves out (partitions' cut tail).
The defaults have many groups (26,214 blocks of 40 records, windows of 16),
so that even P = 1024 partitions hold more than a window of blocks each.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import oracle  # noqa: E402


def stats(order, n, per_block, batch, window, parts=1):
    d = np.abs(np.diff(order))
    blk = order // per_block
    span = per_block * window
    nb = len(order) // batch
    distinct = np.mean([len(np.unique(blk[i * batch:(i + 1) * batch])) for i in range(nb)])
    return {
        "median |P(p+1)-P(p)| / N": np.median(d) / n,
        "p10 |P(p+1)-P(p)| / N": np.percentile(d, 10) / n,
        "distinct blocks per batch": distinct,
        "neighbours from one block": float(np.mean(blk[1:] == blk[:-1])),
        "blocks read by the first window's rows": len(np.unique(blk[:span])),
        # rank 0 of a world of P ranks: its batches g = 0, P, 2P ...
        "... of rank 0 of world P": len(np.unique(
            blk.reshape(-1, batch)[::parts].reshape(-1)[:span])),
        "records left out of the epoch": n - len(order),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1 << 20)
    ap.add_argument("--record-bytes", type=int, default=100)
    ap.add_argument("--block-size", type=int, default=4000)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--partitions", default="1,64,1024",
                    help="comma-separated partition counts of the block shuffle")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    n = a.records
    lens = [a.record_bytes - 16] * n
    per_block = a.block_size // a.record_bytes
    nblocks = -(-n // per_block)
    rows = [("global", stats(oracle.perm(n, a.seed, 0), n, per_block, a.batch, a.window))]
    for p in [int(x) for x in a.partitions.split(",") if x]:
        if p == 1:
            order = oracle.block_perm(lens, [n], a.block_size, a.window, a.seed, 0)
            assert sorted(order.tolist()) == list(range(n))
        else:
            order = oracle.partitioned_perm(lens, [n], a.block_size, a.window, a.seed, 0,
                                            a.batch, p)
            assert len(np.unique(order)) == len(order)
        rows.append(("block P=%d (%.0f blocks each)" % (p, nblocks / p),
                     stats(order, n, per_block, a.batch, a.window, p)))
    print("N=%d records of %d bytes, block_size=%d (%d records, %d blocks), window=%d "
          "(%d records), B=%d" % (n, a.record_bytes, a.block_size, per_block, nblocks, a.window,
                                  per_block * a.window, a.batch))
    print("| measure | " + " | ".join(name for name, _ in rows) + " |")
    print("|---|" + "---|" * len(rows))
    for k in rows[0][1]:
        print("| %s | %s |" % (k, " | ".join("%.4g" % r[k] for _, r in rows)))


if __name__ == "__main__":
    main()
