# SPDX-License-Identifier: Apache-2.0
"""Tiny C trees for the tests of scripts/check-calls and scripts/check-unused:
written under a pytest tmp_path, and built as the real build lays out its
objects (TOP/build/D/X.o, or TOP/build/D/T-X.o when a target has flags of
its own), so that the scripts read them as they read the product's.
"""
import os
import shutil
import subprocess
import sys

import pytest

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
LAYERS = ("decoder", "fs", "mount", "cuda", "python")


def write(top, files):
    """Write files (path: text) under top; a None text deletes the file."""
    for rel, text in files.items():
        p = top / rel
        if text is None:
            p.unlink()
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return top


def build(top):
    """Compile each product .c of top into top/build: decoder/'s objects
    named after a target (libbfsdecoder_a-x.o), the others plain (x.o)."""
    for rel in _files(top, ".c"):
        d, name = os.path.split(rel)
        prefix = "libbfsdecoder_a-" if rel.startswith("decoder") else ""
        compile_c(top, rel, os.path.join("build", d, prefix + name[:-2] + ".o"))
    return top


def compile_c(top, rel, obj, *flags):
    """Compile top/rel into top/obj, every folder with a header on the path."""
    if CC is None:
        pytest.skip("no C compiler to build the tiny tree")
    incs = sorted({os.path.dirname(p) for p in _files(top, ".h")})
    out = top / obj
    out.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([CC, "-c", "-O2", "-w", *flags, *("-I" + str(top / i) for i in incs),
                        str(top / rel), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def _files(top, ext):
    out = []
    for layer in LAYERS:
        for r, _, files in os.walk(top / layer):
            out += [os.path.relpath(os.path.join(r, f), top) for f in files if f.endswith(ext)]
    return sorted(out)


def run(script, top, *args):
    r = subprocess.run([sys.executable, os.path.join(TOP, "scripts", script), *args, str(top)],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def stale(top, rel):
    """Make top/rel newer than its objects."""
    p = top / rel
    t = os.path.getmtime(p) + 60
    os.utime(p, (t, t))


# A tiny product that passes both checks: two decoder units (high's files
# share high_impl.h: one module in two files), fs/ behind its front door
# fs.h, the command, and libbatchfs-cuda's installed header. Calls go one
# way; low.c names high_twice in a comment and a string only.
TREE = {
    "Makefile.am": "cudainc_HEADERS = cuda/batchfs/cuda.h\nnoinst_HEADERS = fs/vfs.h\n",
    "decoder/low/low.h": "int low_add(int a, int b);\nint low_digit(int x);\n",
    "decoder/low/low.c": '#include "low.h"\n'
                         "/* high_twice (high.c) calls low_add */\n"
                         "int low_digit(int x)\n{\n\treturn x % 10;\n}\n"
                         "int low_add(int a, int b)\n{\n"
                         '\tconst char *why = "high_twice";\n'
                         "\treturn low_digit(a) + b + (why[0] == 'h');\n}\n",
    "decoder/high/high.h": "int high_twice(int a);\n",
    "decoder/high/high_impl.h": "int high_part_square(int a);\n",
    "decoder/high/high.c": '#include "high.h"\n#include "high_impl.h"\n#include "low.h"\n'
                           "int high_twice(int a)\n{\n\treturn low_add(high_part_square(a), a);\n}\n",
    "decoder/high/high_part.c": '#include "high_impl.h"\n'
                                "int high_part_square(int a)\n{\n\treturn a * a;\n}\n",
    "fs/fs.h": "int fs_run(int x);\n",
    "fs/session.c": '#include "fs.h"\n#include "vfs.h"\n#include "high.h"\n'
                    "int fs_run(int x)\n{\n\treturn vfs_lookup(high_twice(x));\n}\n",
    "fs/vfs.h": "int vfs_lookup(int x);\n",
    "fs/vfs.c": '#include "vfs.h"\nint vfs_lookup(int x)\n{\n\treturn x + 1;\n}\n',
    "mount/main.c": '#include "fs.h"\nint main(void)\n{\n\treturn fs_run(1);\n}\n',
    "cuda/batchfs/cuda.h": '#ifdef __cplusplus\nextern "C" {\n#endif\n'
                           "int bfs_cuda_open(const char *path);\n"
                           "#ifdef __cplusplus\n}\n#endif\n",
    "cuda/client.c": '#include "cuda.h"\n'
                     "int bfs_cuda_open(const char *path)\n{\n\treturn path[0];\n}\n",
    "tests/unit/check_low.c": '#include "low.h"\n'
                              "int main(void)\n{\n\treturn low_digit(12) != 2;\n}\n",
}


def tree(tmp_path, **changes):
    """TREE under tmp_path with changes (path: text, None to leave a file
    out), built."""
    files = dict(TREE)
    files.update(changes)
    write(tmp_path, {k: v for k, v in files.items() if v is not None})
    return build(tmp_path)
