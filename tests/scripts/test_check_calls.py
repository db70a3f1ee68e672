# SPDX-License-Identifier: Apache-2.0
"""scripts/check-calls fails on what it is there to catch: a file that
declares a function of another module (a header, or a .c file), a front
door that declares another unit's function, a front door left on its list
with nothing to let through, a call circle between the files of a unit
(two files, or three through a callback), and a build it cannot trust.
Each case starts from ctree.TREE, a tiny tree that passes, built with the
C compiler, and adds one offence.

    /usr/bin/python3 -m pytest -q tests/scripts    (scripts/test runs it)
"""
import sys

import pytest
from ctree import run, stale, tree


def check(top):
    return run("check-calls", top)


def test_the_tiny_tree_passes(tmp_path):
    # high_impl.h declares high_part.c's function: both share it, one module;
    # fs.h and cuda.h are front doors; low.c names high_twice in a comment
    # and a string, which are no call back up (no circle with high.c)
    rc, out = check(tree(tmp_path))
    assert rc == 0, out
    assert "each declares only its own module's functions (2 front doors" in out
    assert "no call circle in 5 units" in out


def test_a_header_declaring_another_modules_function_fails(tmp_path):
    top = tree(tmp_path, **{
        "decoder/low/low.h": "int low_add(int a, int b);\nint low_digit(int x);\n"
                             "int other_get(void);\n",
        "decoder/low/other.c": "int other_get(void)\n{\n\treturn 7;\n}\n"})
    rc, out = check(top)
    assert rc == 1
    assert ("decoder/low/low.h:3 declares other_get, a function of decoder/low/other.c "
            "(module other), not of its own module (low)") in out


def test_a_file_that_does_not_share_the_impl_header_is_another_module(tmp_path):
    # high_extra.c defines what high_impl.h declares without including it
    top = tree(tmp_path, **{
        "decoder/high/high_impl.h": "int high_part_square(int a);\nint high_extra(void);\n",
        "decoder/high/high_extra.c": "int high_extra(void)\n{\n\treturn 1;\n}\n"})
    rc, out = check(top)
    assert rc == 1
    assert ("decoder/high/high_impl.h:2 declares high_extra, a function of "
            "decoder/high/high_extra.c (module high_extra), not of its own module (high)") in out
    assert "high_part_square" not in out


def test_a_source_file_declaring_another_files_function_fails(tmp_path):
    top = tree(tmp_path, **{
        "decoder/high/high.c": '#include "high.h"\n#include "high_impl.h"\n'
                               "extern int low_add(int a, int b);\n"
                               "int high_twice(int a)\n{\n\treturn low_add(high_part_square(a), a);\n}\n"})
    rc, out = check(top)
    assert rc == 1
    assert ("decoder/high/high.c:3 declares low_add, a function of decoder/low/low.c "
            "(module low), not of its own module (high)") in out


def test_a_front_door_declaring_another_units_function_fails(tmp_path):
    top = tree(tmp_path, **{"fs/fs.h": "int fs_run(int x);\nint low_add(int a, int b);\n"})
    rc, out = check(top)
    assert rc == 1
    assert ("fs/fs.h:2 declares low_add, a function of decoder/low/low.c (module low), "
            "not of its own module (fs)") in out
    assert "fs_run" not in out


def test_a_front_door_with_nothing_to_let_through_is_stale(tmp_path):
    top = tree(tmp_path, **{"fs/fs.h": "/* nothing */\n",
                            "mount/main.c": "int main(void)\n{\n\treturn 0;\n}\n",
                            "cuda/batchfs/cuda.h": None,
                            "cuda/client.c": "int bfs_cuda_open(const char *path)\n{\n"
                                             "\treturn path[0];\n}\n"})
    rc, out = check(top)
    assert rc == 1
    assert ("FRONT_DOORS in scripts/check-calls: fs/fs.h no longer declares a function of "
            "another file of its unit: take it off the list") in out
    assert "FRONT_DOORS in scripts/check-calls: cuda/batchfs/cuda.h is gone" in out


def test_a_call_circle_between_two_files_fails(tmp_path):
    top = tree(tmp_path, **{
        "decoder/low/more.h": "int low_more(int x);\n",
        "decoder/low/more.c": '#include "more.h"\n#include "low.h"\n'
                              "int low_more(int x)\n{\n\treturn low_add(low_digit(x), 1);\n}\n",
        "decoder/low/low.c": '#include "low.h"\n#include "more.h"\n'
                             "int low_digit(int x)\n{\n\treturn x % 10;\n}\n"
                             "int low_add(int a, int b)\n{\n"
                             "\treturn b ? low_digit(a) + b : low_more(a);\n}\n"})
    rc, out = check(top)
    assert rc == 1
    assert ("call circle in decoder/low/: low.c -> more.c (low_more in more.h) -> "
            "low.c (low_add in low.h)") in out
    # -v: every function of each arrow
    rc, out = run("check-calls", top, "-v")
    assert rc == 1
    assert ("call circle in decoder/low/: low.c -> more.c (low_more in more.h) -> "
            "low.c (low_add in low.h; low_digit in low.h)") in out


def test_a_circle_through_a_callback_and_a_third_file_fails(tmp_path):
    # vfs.c calls cache.c, cache.c calls views.c, and views.c keeps vfs.c's
    # function in a table of handlers: taking its address is calling it
    top = tree(tmp_path, **{
        "fs/cache.h": "int cache_get(int x);\n",
        "fs/cache.c": '#include "cache.h"\n#include "views.h"\n'
                      "int cache_get(int x)\n{\n\treturn views_pick(x);\n}\n",
        "fs/views.h": "int views_pick(int x);\n",
        "fs/views.c": '#include "views.h"\n#include "vfs.h"\n'
                      "static int (*const hooks[])(int) = { vfs_lookup };\n"
                      "int views_pick(int x)\n{\n\treturn x > 0 ? hooks[0](x - 1) : 0;\n}\n",
        "fs/vfs.c": '#include "vfs.h"\n#include "cache.h"\n'
                    "int vfs_lookup(int x)\n{\n\treturn x > 9 ? cache_get(x / 2) : x + 1;\n}\n"})
    rc, out = check(top)
    assert rc == 1
    assert ("call circle in fs/: cache.c -> views.c (views_pick in views.h) -> vfs.c "
            "(vfs_lookup in vfs.h) -> cache.c (cache_get in cache.h)") in out


def test_a_stale_build_fails(tmp_path):
    top = tree(tmp_path)
    stale(top, "decoder/low/low.c")
    rc, out = check(top)
    assert rc == 1
    assert "decoder/low/low.c is newer than its objects" in out


def test_no_build_fails(tmp_path):
    top = tree(tmp_path)
    for o in (top / "build").rglob("*.o"):
        o.unlink()
    rc, out = check(top)
    assert rc == 1
    assert "no object of the product's files" in out


def test_a_file_not_built_is_named(tmp_path):
    top = tree(tmp_path)
    # a file this configuration does not build (like fetch_nouring.c where
    # liburing is there): what it defines is not known, and the line says so
    (top / "decoder/high/high_alt.c").write_text(
        '#include "high.h"\nint high_alt(void)\n{\n\treturn high_twice(2);\n}\n')
    rc, out = check(top)
    assert rc == 0, out
    assert "not built here, calls read from the source: decoder/high/high_alt.c" in out


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
