# SPDX-License-Identifier: Apache-2.0
"""The bench's harness: running and timing children, the CPU and memory of a
process, cache dropping, repeats (medians), and its FUSE mounts (through
tests/integration/fusemount.py, the tests' own helper), each read by
tests/bench/readtree with the daemon's CPU seconds taken around it.

Not thread-safe: the bench runs one step at a time.
"""

import json
import os
import shutil
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.path.join(TOP, "tests", "integration") not in sys.path:
    sys.path.insert(0, os.path.join(TOP, "tests", "integration"))

import fusemount  # noqa: E402

ENTRY = os.path.join(TOP, "scripts", "bench.py")  # run again as a child for the Python rows
MiB = 1 << 20
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
COLD_RUNS = 3  # cold reads per workload (batchfs and null FUSE, interleaved); 1 with --quick
MOUNT_SECONDS = 600  # a first mount builds the index of up to 10^8 records
# a pass over "the batch tree" reads the batch folders and files of epoch-0000,
# not its whole-epoch views (all/, all.safetensors: rows of their own)
BATCHES_ONLY = ("--exclude", "all", "--exclude", "all.safetensors")


def log(msg):
    print("  .. " + msg, file=sys.stderr, flush=True)


LAST_CPU = [0.0]  # CPU seconds (user + system) of the last run_child


def run_child(cmd, stdout=subprocess.PIPE, cwd=None, env=None):
    """Run cmd to the end; returns (rc, stdout text, seconds, peak RSS bytes)
    with the RSS of that child alone (wait4); its CPU time goes to LAST_CPU."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    out = b""
    if p.stdout:
        out = p.stdout.read()
        p.stdout.close()
    _, status, ru = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t0
    LAST_CPU[0] = ru.ru_utime + ru.ru_stime
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, out.decode(errors="replace"), secs, ru.ru_maxrss * 1024


def check_child(cmd, **kw):
    rc, out, secs, rss = run_child(cmd, **kw)
    if rc != 0:
        raise RuntimeError("%s failed with status %d" % (" ".join(cmd), rc))
    return out, secs, rss


def json_lines(text):
    return [json.loads(l) for l in text.splitlines() if l.startswith("{")]


def proc_cpu(pid):
    """CPU seconds (user + system) used so far by process pid."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return 0.0


def vm_hwm(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rss_parts(pid):
    """(RssAnon, RssFile + RssShmem) in bytes now, or None: file-backed pages
    (mapped shards, say) count in VmHWM too."""
    got = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(("RssAnon:", "RssFile:", "RssShmem:")):
                    got[line.split(":")[0]] = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    if "RssAnon" not in got:
        return None
    return got["RssAnon"], got.get("RssFile", 0) + got.get("RssShmem", 0)


def proc_status(pid, keys=("VmRSS", "RssAnon", "RssFile")):
    got = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k = line.split(":")[0]
                if k in keys:
                    got[k] = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return got


def proc_rchar(pid):
    """Bytes the process read through read/pread so far (mapped pages not counted)."""
    try:
        with open("/proc/%d/io" % pid) as f:
            for line in f:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def drop_caches(args):
    if not args.drop_caches:
        return
    subprocess.run(["sync"], check=False)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def evict(paths):
    """Drop these files (only these) from the page cache: a cold read."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages (a fresh dataset) are not dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def parse_size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    if text and text[-1].upper() in mult:
        return int(text[:-1]) * mult[text[-1].upper()]
    return int(text)


def set_cold_runs(n):
    global COLD_RUNS
    COLD_RUNS = max(1, n)


class NullCtx:
    """A `with` target that is nothing (None)."""

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def fresh_disk_cache():
    """Empty the default disk cache (disk_cache=auto: under XDG_CACHE_HOME,
    which scripts/bench points into its work folder), so that the next
    mount of a bucket or a slow source reads the source as a new user's
    first mount does, not what earlier mounts of the run kept."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    shutil.rmtree(os.path.join(base, "batchfs", "disk_cache"), ignore_errors=True)


def mount(cmd, mnt, env=None):
    """Start the FUSE daemon of cmd (which holds -f) on mnt and wait for its
    mount, for a `with` block: what a killed run left at mnt is taken away
    first, and a daemon found dead at the end is logged with its last
    words. m.pid is the daemon's, m.mount_seconds its start to the mount."""
    return fusemount.FuseMount(cmd, mnt, deadline=MOUNT_SECONDS, env=env, replace=True,
                               report=log, exit_deadline=60).start()


def read_tree(m, tools, path, *extra):
    """readtree over path (a tree or one file) on mount m; its JSON with the
    daemon's CPU seconds during the read added as "daemon_cpu" and the
    reader's as "reader_cpu"."""
    c0 = proc_cpu(m.pid)
    r = json_lines(check_child([tools["readtree"]] + list(extra) + [path])[0])[0]
    c1 = proc_cpu(m.pid)
    r["daemon_cpu"] = c1 - c0 if c0 is not None and c1 is not None else None
    r["reader_cpu"] = LAST_CPU[0]
    return r


def median_read(m, tools, path, *extra, n=3):
    """n re-reads of a tree; the one with the median time."""
    runs = sorted((read_tree(m, tools, path, *extra) for _ in range(n)),
                  key=lambda r: r["seconds"])
    return runs[n // 2]


def memory(m):
    """(VmHWM, (RssAnon, RssFile + RssShmem)) of mount m's daemon now."""
    parts = rss_parts(m.pid)
    return vm_hwm(m.pid), parts


def read_stats(mnt):
    try:
        with open(mnt + "/stats.json") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        return "?"


def build_tools(args):
    """scripts/build into --build-dir; the paths of what the bench runs
    (batchfs and bench_decode from --product-from when given), or None
    when the build failed."""
    log("building")
    bdir = os.path.abspath(args.build_dir)
    r = subprocess.run([os.path.join(TOP, "scripts", "build"), bdir], stdout=subprocess.PIPE,
                       text=True)
    if r.returncode != 0:
        return None
    tools = {"batchfs": r.stdout.strip().splitlines()[-1],
             "gen": os.path.join(bdir, "tests", "gen", "bfs_gen"),
             "nullfs": os.path.join(bdir, "tests", "bench", "nullfs"),
             "readtree": os.path.join(bdir, "tests", "bench", "readtree"),
             "bench_decode": os.path.join(bdir, "tests", "bench", "bench_decode"),
             "bench_jpeg": os.path.join(bdir, "tests", "bench", "bench_jpeg")}
    if args.product_from:  # an earlier commit's daemon and decoder, the rest as built here
        pdir = os.path.abspath(args.product_from)
        tools["batchfs"] = os.path.join(pdir, "batchfs")
        tools["bench_decode"] = os.path.join(pdir, "tests", "bench", "bench_decode")
    return tools
