#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench.py — throughput of the object-store client through s3proxy.py with
a first-byte delay, against s3rver: reads of SIZE bytes at random offsets
of one object, CONNS of them in flight (s3tool bench), for each CONNS and
SIZE given. Starts its own servers (like the tests), prints one JSON line
per run and a table, and the CPU time each process spent.

  tests/s3/bench.py [--delay-ms 20] [--conns 16,128] [--sizes 65536,4194304]
                    [--reads 2000] [--bytes 1G] [--s3rvers 2] [--workers 1]
                    [--object-mb 128]

--reads bounds the reads of a run, --bytes its bytes (whichever comes first).
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

import s3env


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu(pid):
    """CPU seconds of pid and its children (the proxy's workers)."""
    total = cpu_s(pid)
    for child in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True,
                                text=True).stdout.split():
        total += cpu_s(int(child))
    return total


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay-ms", type=float, default=20)
    ap.add_argument("--conns", default="16,128")
    ap.add_argument("--sizes", default="65536,4194304")
    ap.add_argument("--reads", type=int, default=2000)
    ap.add_argument("--bytes", default="1G")
    ap.add_argument("--s3rvers", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--object-mb", type=int, default=128)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bfs-s3bench-")
    servers = []
    try:
        data = os.path.join(work, "data")
        first = s3env.start_s3rver(data, buckets=["bench"])
        servers.append(first)
        c = s3env.boto_client(first.url)
        blob = os.urandom(1 << 20)
        body = b"".join(blob[i:] + blob[:i] for i in range(a.object_mb))
        c.put_object(Bucket="bench", Key="object", Body=body)
        del body
        for _ in range(a.s3rvers - 1):
            servers.append(s3env.start_s3rver(data))
        ups = ",".join("%s:%d" % (s.host, s.port) for s in servers)
        proxy = s3env.start_proxy(ups, "--delay-ms", str(a.delay_ms), "--no-log",
                                  "--workers", str(a.workers))
        servers.append(proxy)
        tool = s3env.Tool(s3env.tool_path(), work)
        rows = []
        for size in [int(x) for x in a.sizes.split(",")]:
            for conns in [int(x) for x in a.conns.split(",")]:
                reads = max(conns * 4, min(a.reads, size_arg(a.bytes) // size))
                t0 = {s: tree_cpu(s.p.pid) for s in servers}
                ru = resource.getrusage(resource.RUSAGE_CHILDREN)
                r = tool.run("bench", "s3://bench/object", str(size), str(reads),
                             opts="endpoint=%s,conns=%d" % (proxy.url, conns))
                res = json.loads(r.stdout)
                res["delay_ms"] = a.delay_ms
                ru2 = resource.getrusage(resource.RUSAGE_CHILDREN)
                res["client_cpu_s"] = round(ru2.ru_utime + ru2.ru_stime - ru.ru_utime
                                            - ru.ru_stime, 2)
                res["proxy_cpu_s"] = round(tree_cpu(proxy.p.pid) - t0[proxy], 2)
                res["s3rver_cpu_s"] = round(sum(tree_cpu(s.p.pid) - t0[s]
                                                for s in servers if s is not proxy), 2)
                print(json.dumps(res), flush=True)
                rows.append(res)
        print("\n%8s %6s %8s %10s %10s %12s %12s %12s" % (
            "size", "conns", "reads", "MB/s", "reads/s", "client cpu", "proxy cpu", "s3rver cpu"))
        for r in rows:
            print("%8d %6d %8d %10.1f %10.1f %11.2fs %11.2fs %11.2fs" % (
                r["size"], r["conns"], r["reads"], r["MBps"], r["reads_per_s"],
                r["client_cpu_s"], r["proxy_cpu_s"], r["s3rver_cpu_s"]))
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
