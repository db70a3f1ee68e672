# SPDX-License-Identifier: Apache-2.0
"""scripts/check-unused fails on what it is there to catch: an exported
function that only its own file calls, one that only tests call, one that
nothing calls, an API function whose header is not installed, a seam whose
test is gone, and a build it cannot trust; and lets through what has a
caller outside the product (main, the installed API, PyInit_, a test
seam). Each case starts from ctree.TREE, a tiny tree that passes (its
tests/unit/check_low.c calls low.c's low_digit, which low.c calls too: a
seam), built with the C compiler, and adds one offence.

    /usr/bin/python3 -m pytest -q tests/scripts    (scripts/test runs it)
"""
import sys

import pytest
from ctree import TREE, compile_c, run, stale, tree

LOW_H = TREE["decoder/low/low.h"]
LOW_C = TREE["decoder/low/low.c"]


def check(top):
    return run("check-unused", top)


def test_the_tiny_tree_passes(tmp_path):
    rc, out = check(tree(tmp_path))
    assert rc == 0, out
    assert ("8 exported functions in 7 files, each called from another file of the product "
            "(besides: 1 of an installed library's API, 1 test seams)") in out
    rc, out = run("check-unused", tmp_path, "-v")
    assert rc == 0, out
    assert ("let through: decoder/low/low.c low_digit: a test seam (its own file and "
            "tests/unit/check_low.c)") in out
    assert "let through: cuda/client.c bfs_cuda_open: an installed header declares it" in out


def test_a_function_only_its_own_file_calls_fails(tmp_path):
    # the seam's test is gone (a comment naming it is no call)
    top = tree(tmp_path, **{"tests/unit/check_low.c": "/* low_digit */\n"})
    rc, out = check(top)
    assert rc == 1
    assert "decoder/low/low.c:3 low_digit: only its own file calls it: make it static" in out
    assert "1 of 8 exported functions without a caller" in out


def test_a_function_only_tests_call_fails(tmp_path):
    top = tree(tmp_path, **{
        "decoder/low/low.h": LOW_H + "int low_sub(int a, int b);\n",
        "decoder/low/low.c": LOW_C + "int low_sub(int a, int b)\n{\n\treturn a - b;\n}\n",
        "tests/unit/check_low.c": '#include "low.h"\n'
                                  "int main(void)\n{\n\treturn low_digit(12) + low_sub(1, 1) != 2;\n}\n"})
    rc, out = check(top)
    assert rc == 1
    assert ("decoder/low/low.c:12 low_sub: no product code calls it, only tests "
            "(tests/unit/check_low.c): the product never runs it") in out
    assert "low_digit" not in out


def test_a_function_nothing_calls_fails(tmp_path):
    top = tree(tmp_path, **{
        "fs/vfs.h": "int vfs_lookup(int x);\nint vfs_forget(int x);\n",
        "fs/vfs.c": '#include "vfs.h"\nint vfs_lookup(int x)\n{\n\treturn x + 1;\n}\n'
                    "int vfs_forget(int x)\n{\n\treturn vfs_forget(x - 1);\n}\n"})
    rc, out = check(top)
    assert rc == 1
    # calling itself is not being used
    assert "fs/vfs.c:6 vfs_forget: nothing calls it: remove it" in out


def test_a_header_not_installed_is_no_api(tmp_path):
    top = tree(tmp_path, **{"Makefile.am": "noinst_HEADERS = cuda/batchfs/cuda.h\n"})
    rc, out = check(top)
    assert rc == 1
    assert "cuda/client.c:2 bfs_cuda_open: nothing calls it: remove it" in out


def test_a_callback_is_a_call_and_a_comment_is_none(tmp_path):
    table = ("static int (*const ops[])(int) = { low_digit, low_hook };\n"
             "/* low_named is not called here */\n")
    top = tree(tmp_path, **{
        "decoder/low/low.h": LOW_H + "int low_hook(int x);\nint low_named(void);\n",
        "decoder/low/low.c": LOW_C + "int low_hook(int x)\n{\n\treturn x;\n}\n"
                                     "int low_named(void)\n{\n\treturn 0;\n}\n",
        "decoder/high/high.c": '#include "high.h"\n#include "high_impl.h"\n#include "low.h"\n' +
                               table + "int high_twice(int a)\n{\n"
                               "\treturn low_add(high_part_square(a), ops[1](a));\n}\n"})
    rc, out = check(top)
    assert rc == 1
    assert "low_hook" not in out
    assert "decoder/low/low.c:16 low_named: nothing calls it: remove it" in out


def test_a_python_extensions_init_needs_no_caller(tmp_path):
    top = tree(tmp_path, **{"python/ext.c": "int PyInit_ext(void)\n{\n\treturn 0;\n}\n"})
    rc, out = check(top)
    assert rc == 0, out
    top = tree(tmp_path, **{"python/ext.c": "int PyInit_ext(void)\n{\n\treturn 0;\n}\n"
                                            "int ext_helper(void)\n{\n\treturn 1;\n}\n"})
    rc, out = check(top)
    assert rc == 1
    assert "python/ext.c:5 ext_helper: nothing calls it" in out


def test_a_test_programs_build_of_a_product_file_is_no_caller(tmp_path):
    # fs/vfs.c built again for a test program, with a flag that makes it
    # call low_test_only: that object (tests_..._vfs-vfs.o) is not the product
    top = tree(tmp_path, **{
        "decoder/low/low.h": LOW_H + "int low_test_only(void);\n",
        "decoder/low/low.c": LOW_C + "int low_test_only(void)\n{\n\treturn 0;\n}\n",
        "fs/vfs.c": '#include "vfs.h"\n#include "low.h"\nint vfs_lookup(int x)\n{\n'
                    "#ifdef FOR_TESTS\n\tx += low_test_only();\n#endif\n\treturn x + 1;\n}\n"})
    compile_c(top, "fs/vfs.c", "build/fs/tests_unit_check_vfs-vfs.o", "-DFOR_TESTS")
    rc, out = check(top)
    assert rc == 1
    assert "decoder/low/low.c:12 low_test_only: nothing calls it: remove it" in out


def test_a_stale_build_fails(tmp_path):
    top = tree(tmp_path)
    stale(top, "fs/vfs.c")
    rc, out = check(top)
    assert rc == 1
    assert "fs/vfs.c is newer than its objects" in out


def test_a_caller_not_built_here_still_counts(tmp_path):
    # high_alt.c is not built in this configuration (like fetch_nouring.c):
    # its calls are read from its source, and high_only (which nothing else
    # calls) is not reported
    top = tree(tmp_path, **{
        "decoder/high/high.h": "int high_twice(int a);\nint high_only(void);\n",
        "decoder/high/high.c": TREE["decoder/high/high.c"] +
                               "int high_only(void)\n{\n\treturn 3;\n}\n"})
    rc, out = check(top)
    assert rc == 1 and "high_only: nothing calls it" in out
    (top / "decoder/high/high_alt.c").write_text(
        '#include "high.h"\nint high_alt(void)\n{\n\treturn high_only();\n}\n')
    rc, out = check(top)
    assert rc == 0, out
    assert "not built here, calls read from the source: decoder/high/high_alt.c" in out


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
