"""A mixture with a bucket source (docs/contract.md, "Mixtures"): one source
in the test S3 server (s3rver behind test_bucket.py's signature-checking
proxy), two local, mounted and compared with mixref.py (every row's
source and record) and byte for byte with a mixture of the same files all
local. Skips without s3rver, as test_bucket.py does."""

import json

import numpy as np

from mixref import Mixture
from test_bucket import BUCKET, bmount, boto, data, object_gets, proxy, s3, tree  # noqa: F401

B = 16


def test_mixture_with_a_bucket_source(bmount, proxy, data, tmp_path):  # noqa: F811
    names = ["remote", "gz", "fixed"]
    srcs = ["s3://%s/plain/" % BUCKET, data["gzip"], data["fixed"]]
    local = [data["plain"], data["gzip"], data["fixed"]]
    weights = [5, 2, 3]

    def mixfile(name, sources):
        p = tmp_path / name
        p.write_text(json.dumps({"mixture": [{"name": n, "source": s, "weight": w}
                                             for n, s, w in zip(names, sources, weights)],
                                 "epoch": "all_exhausted"}))
        return str(p)

    opts = dict(batch_size=B, seed=3, features="x,img")
    m = bmount(mixfile("remote.json", srcs), endpoint=proxy.endpoint, **opts)
    ref_m = bmount(mixfile("local.json", local), **opts)
    facts = m.json("schema.json")["mixture"]
    counts = [e["records"] for e in facts["sources"]]
    ref = Mixture(names, counts, [(0, weights)], "all_exhausted", seed=3)
    assert facts["epoch_records"] == ref.L
    for e in (0, 1):
        rows = ref.epoch(e)
        s = np.load(m.path("epoch-%04d" % e, "all", "_source.npy"))
        r = np.load(m.path("epoch-%04d" % e, "all", "_record.npy"))
        assert list(zip(s.tolist(), r.tolist())) == rows
    # the same tree and bytes as the mixture of local files
    assert tree(m) == tree(ref_m)
    for p in tree(m):
        if p.startswith("epoch-0001/") and not p.endswith("/"):
            assert m.read(p) == ref_m.read(p), p
    # the remote source's records came from the bucket
    assert object_gets(proxy.log())
