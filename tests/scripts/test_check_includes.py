# SPDX-License-Identifier: Apache-2.0
"""scripts/check-includes fails on what it is there to catch: an include
that points up or sideways across the ranked units, a mount/ file that
includes an fs/ header off its list, a decoder folder with no rank, a rank
table whose "may include" cell disagrees with its ranks, a module cycle.
Each case starts from a tiny tree that passes and adds one offence; the
real checkout passes.

    /usr/bin/python3 -m pytest -q tests/scripts    (scripts/test runs it)
"""
import os
import subprocess
import sys

import pytest

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(TOP, "scripts", "check-includes")

TABLE = """# Architecture

### Units, ranked

| Rank | Unit | What it is | May include |
|---|---|---|---|
| 0 | `decoder/low/` | the lowest | — |
| 0 | `decoder/side/` | beside it | — |
| 1 | `decoder/high/` | above both | low, side |
| 2 | `fs/` | the filesystem | every decoder unit |
| 3 | `mount/` | the command | every decoder unit; of fs/, MOUNT_FS_HEADERS |

## Next
"""

TREE = {
    "docs/architecture.md": TABLE,
    "decoder/low/low.h": "#include <stdint.h>\n",
    "decoder/low/low.c": '#include "low.h"\n',
    "decoder/side/side.h": "",
    "decoder/high/high.h": '#include "low.h"\n#include "side.h"\n',
    "decoder/high/high.c": '#include "high.h"\n',
    "fs/fs.h": '#include "high.h"\n',
    "fs/vfs.h": "",
    "fs/vfs.c": '#include "vfs.h"\n#include "fs.h"\n',
    "mount/main.c": '#include "fs.h"\n#include "high.h"\n#include "low.h"\n',
}


def run(top):
    r = subprocess.run([sys.executable, SCRIPT, str(top)], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def tree(tmp_path, **changes):
    """The tiny tree written under tmp_path, with the files in changes
    (path: text) added or replacing its own."""
    files = dict(TREE)
    files.update(changes)
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_the_tiny_tree_passes(tmp_path):
    rc, out = run(tree(tmp_path))
    assert rc == 0, out
    assert "every include points down" in out


def test_this_checkout_passes():
    rc, out = run(TOP)
    assert rc == 0, out
    assert "every include points down" in out and "no include cycle" in out


def test_an_include_up_fails(tmp_path):
    top = tree(tmp_path, **{"decoder/low/low.c": '#include "low.h"\n#include "high.h"\n'})
    rc, out = run(top)
    assert rc == 1
    assert ('decoder/low/low.c: #include "high.h" (decoder/high/, rank 1) points up '
            "from decoder/low/ (rank 0)") in out


def test_an_include_sideways_fails(tmp_path):
    top = tree(tmp_path, **{"decoder/side/side.h": '#include "low.h"\n'})
    rc, out = run(top)
    assert rc == 1
    assert ('decoder/side/side.h: #include "low.h" (decoder/low/, rank 0) points sideways '
            "from decoder/side/ (rank 0)") in out


def test_the_decoder_including_fs_fails(tmp_path):
    top = tree(tmp_path, **{"decoder/high/high.c": '#include "high.h"\n#include "vfs.h"\n'})
    rc, out = run(top)
    assert rc == 1
    assert 'decoder/high/high.c: #include "vfs.h" (fs/, rank 2) points up' in out


def test_fs_including_mount_fails(tmp_path):
    top = tree(tmp_path, **{"mount/main.h": "", "fs/vfs.c": '#include "main.h"\n'})
    rc, out = run(top)
    assert rc == 1
    assert 'fs/vfs.c: #include "main.h" (mount/, rank 3) points up from fs/ (rank 2)' in out


def test_mount_including_an_unlisted_fs_header_fails(tmp_path):
    top = tree(tmp_path, **{"mount/main.c": '#include "fs.h"\n#include "vfs.h"\n'})
    rc, out = run(top)
    assert rc == 1
    assert 'mount/main.c: #include "vfs.h" (fs/, rank 2): mount/ may include of fs/ only' in out
    assert "fs.h" in out.split("only", 1)[1]  # the list is named


def test_a_folder_with_no_rank_fails(tmp_path):
    top = tree(tmp_path, **{"decoder/new/new.c": '#include "low.h"\n'})
    rc, out = run(top)
    assert rc == 1
    assert "decoder/new/ has no rank" in out


def test_a_wrong_may_include_cell_fails(tmp_path):
    top = tree(tmp_path, **{"docs/architecture.md": TABLE.replace("| low, side |", "| low |")})
    rc, out = run(top)
    assert rc == 1
    assert "decoder/high/ (rank 1) may include low; the units ranked below it are low, side" in out


def test_a_missing_table_fails(tmp_path):
    top = tree(tmp_path, **{"docs/architecture.md": "# Architecture\n"})
    rc, out = run(top)
    assert rc == 1
    assert "no '### Units, ranked' section" in out


def test_a_header_in_two_units_fails(tmp_path):
    top = tree(tmp_path, **{"fs/low.h": ""})
    rc, out = run(top)
    assert rc == 1
    assert "header low.h is not unique" in out


def test_a_module_cycle_fails(tmp_path):
    top = tree(tmp_path, **{"decoder/low/a.h": '#include "b.h"\n',
                            "decoder/low/b.h": '#include "a.h"\n'})
    rc, out = run(top)
    assert rc == 1
    assert "cycle: a (a.h includes b.h) -> b (b.h includes a.h) -> a" in out


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
