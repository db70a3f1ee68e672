# SPDX-License-Identifier: Apache-2.0
"""scripts/check-length fails on what it is there to catch: a function of
the product code over 120 body lines, in decoder/ or fs/ or mount/, unless
the allow-list names it; and an allow-list entry that is no longer needed.
It counts between braces at column 0, leaves protoc-c's decoder/proto/ and
python/'s subfolders alone. Each case writes a tiny tree; the real checkout
passes.

    /usr/bin/python3 -m pytest -q tests/scripts
"""
import os
import subprocess
import sys

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(TOP, "scripts", "check-length")


def func(name, body_lines):
    """A C function whose body is body_lines lines between its braces."""
    body = "".join(f"\tx += {i};\n" for i in range(body_lines - 1))
    return f"static int {name}(int x)\n{{\n{body}\treturn x;\n}}\n"


def run(top, *args):
    r = subprocess.run([sys.executable, SCRIPT, "--top", str(top), *args],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def tree(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_120_lines_pass(tmp_path):
    top = tree(tmp_path, {"decoder/a/a.c": "/* a */\n" + func("short_one", 5) + "\n" +
                          func("at_the_limit", 120), "fs/f.c": func("f", 120)})
    rc, out = run(top)
    assert rc == 0, out
    assert "no function over 120 lines" in out


def test_121_lines_fail_and_are_named(tmp_path):
    top = tree(tmp_path, {"decoder/a/a.c": func("fine", 3) + "\n" + func("too_long", 121)})
    rc, out = run(top)
    assert rc == 1
    assert "121 decoder/a/a.c:9 too_long" in out  # the line of its opening brace
    assert "fine" not in out


def test_fs_and_mount_count_too(tmp_path):
    top = tree(tmp_path, {"fs/f.c": func("in_fs", 200), "mount/m.c": func("in_mount", 130)})
    rc, out = run(top)
    assert rc == 1
    assert "fs/f.c:2 in_fs" in out and "mount/m.c:2 in_mount" in out


def test_proto_and_python_subfolders_are_left_out(tmp_path):
    top = tree(tmp_path, {"decoder/proto/x.pb-c.c": func("generated", 500),
                          "python/pkg/ext.c": func("elsewhere", 500)})
    rc, out = run(top)
    assert rc == 0, out
    top = tree(tmp_path, {"python/mod.c": func("module", 130)})
    rc, out = run(top)
    assert rc == 1 and "python/mod.c:2 module" in out


def test_the_allow_list_lets_one_through_and_only_while_needed(tmp_path):
    top = tree(tmp_path, {"mount/m.c": func("being_split", 300),
                          "scripts/check-length.allow": "# comment\nmount/m.c being_split\n"})
    rc, out = run(top)
    assert rc == 0, out
    assert "1 allowed" in out
    tree(tmp_path, {"mount/m.c": func("being_split", 40)})
    rc, out = run(top)
    assert rc == 1
    assert "'mount/m.c being_split' is no longer over 120 lines" in out


def test_a_brace_left_open_is_an_error(tmp_path):
    top = tree(tmp_path, {"decoder/a/a.c": "int f(void)\n{\n\treturn 0;\n"})
    rc, out = run(top)
    assert rc != 0
    assert "decoder/a/a.c:2" in out


def test_this_checkout_passes():
    rc, out = run(TOP)
    assert rc == 0, out
    assert "no function over 120 lines" in out
