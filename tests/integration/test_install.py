# SPDX-License-Identifier: Apache-2.0
"""batchfs installed like a system tool: `make install`
puts the binary, the man page and the Python module in their places (into a
DESTDIR here), the installed module finds the installed binary, the man
page names every command and option of `batchfs --help`, and an /etc/fstab
line of type fuse.batchfs (noauto,user,allow_other) mounts with
`mount MOUNTPOINT` (the line is added for the test and removed after it,
even on failure)."""

import fcntl
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from fusemount import MOUNT_DEADLINE, unmount, wait_for
from helpers import batchfs_on_sh_path, mount_helper_usable


def _build_dir(binary):
    d = os.path.dirname(os.path.abspath(binary))
    if not os.path.isfile(os.path.join(d, "Makefile")):
        pytest.skip("%s is not in a configured build tree" % binary)
    return d


@pytest.fixture(scope="module")
def installed(batchfs, tmp_path_factory):
    """A `make install DESTDIR=...` of the build tree the tested binary is in."""
    dest = tmp_path_factory.mktemp("destdir")
    r = subprocess.run(["make", "-s", "-C", _build_dir(batchfs), "install", "DESTDIR=%s" % dest],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    assert r.returncode == 0, r.stdout.decode(errors="replace")[-3000:]
    prefix = subprocess.run(["make", "-s", "-C", _build_dir(batchfs), "--no-print-directory",
                             "-f", "Makefile", "-f", "-", "print-prefix"],
                            input=b"print-prefix:\n\t@echo $(prefix)\n", stdout=subprocess.PIPE,
                            check=True).stdout.decode().strip()
    return str(dest) + prefix


def test_install_puts_binary_man_page_and_module(installed, batchfs):
    exe = os.path.join(installed, "bin", "batchfs")
    assert os.access(exe, os.X_OK)
    v = subprocess.run([exe, "--version"], stdout=subprocess.PIPE, check=True).stdout
    assert v == subprocess.run([batchfs, "--version"], stdout=subprocess.PIPE, check=True).stdout
    assert os.path.isfile(os.path.join(installed, "share", "man", "man1", "batchfs.1"))
    pkg = os.path.join(installed, "lib", "python3", "dist-packages", "batchfs")
    for f in ("__init__.py", "__main__.py", "numpy.py", "torch.py"):
        assert os.path.isfile(os.path.join(pkg, f)), f


def test_installed_module_finds_installed_binary(installed):
    site = os.path.join(installed, "lib", "python3", "dist-packages")
    env = {k: v for k, v in os.environ.items() if k not in ("BATCHFS", "PYTHONPATH")}
    env["PYTHONPATH"] = site
    env["PATH"] = "/usr/bin:/bin"  # an installed batchfs elsewhere must not be taken
    code = ("import batchfs, batchfs.numpy, batchfs.torch; "
            "print(batchfs.__file__); print(batchfs.find_binary())")
    r = subprocess.run(["/usr/bin/python3", "-c", code], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120, cwd="/")
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    mod, exe = r.stdout.decode().split()
    assert mod == os.path.join(site, "batchfs", "__init__.py")
    assert exe == os.path.join(installed, "bin", "batchfs")
    r = subprocess.run(["/usr/bin/python3", "-m", "batchfs", "--version"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, cwd="/")
    assert r.returncode == 0 and r.stdout.startswith(b"batchfs "), r.stderr


def _man_text(path):
    if shutil.which("man"):
        r = subprocess.run(["man", "-l", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=dict(os.environ, MANWIDTH="200", MAN_KEEP_FORMATTING="0"), timeout=60)
        if r.returncode == 0:
            return re.sub(r".\x08", "", r.stdout.decode(errors="replace"))
    return open(path, encoding="utf-8", errors="replace").read().replace("\\-", "-")


def test_man_page_covers_every_command_and_option(installed, batchfs):
    text = _man_text(os.path.join(installed, "share", "man", "man1", "batchfs.1"))
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "MOUNT OPTIONS", "THE TREE",
                    "EXIT STATUS", "EXAMPLES", "SEE ALSO"):
        assert re.search(r"^%s\s*$" % section, text, re.M), "no %s section" % section
    usage = subprocess.run([batchfs, "--help"], stdout=subprocess.PIPE, check=True).stdout.decode()
    section = usage.split("Mount options", 1)[1].split("Unmount")[0]
    # k=V and k[=V] options, and the flags (names with an underscore alone)
    opts = set(re.findall(r"\b([a-z_]+)\[?=", section))
    opts |= set(re.findall(r"(?<![=\w])([a-z]+_[a-z_]+)(?![=\w\[])", section))
    opts.discard("k")  # "-o k=v,k=v" itself
    assert {"batch_size", "seed", "shuffle", "cache_size", "chunk_rows", "cuda"} <= opts, opts
    for o in sorted(opts):
        assert re.search(r"\b%s\b" % o, text), "option %s is not in the man page" % o
    for cmd in ("inspect", "schema", "index", "--help", "--version", "-f", "-d", "fusermount3 -u",
                "README.txt", "schema.json", "stats.json", "errors.txt", "all.safetensors",
                "SIGINT", "SIGTERM", "SIGHUP", "fuse.batchfs"):
        assert cmd in text, cmd


# ---------------------------------------------------------------- /etc/fstab

FSTAB = "/etc/fstab"


def _edit_fstab(fn):
    with open(FSTAB, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            text = f.read()
            new = fn(text)
            f.seek(0)
            f.write(new)
            f.truncate()
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def test_fstab_line_mounts_with_mount_mountpoint(batchfs, ds_plain, tmp_path, index_dir):
    why = mount_helper_usable()
    if why:
        pytest.skip(why)
    if not os.access(FSTAB, os.W_OK):
        pytest.skip("/etc/fstab is not writable")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for p in (ds_plain.path, str(mnt), index_dir):
        if re.search(r"\s", p):
            pytest.skip("a test path holds white space: %s" % p)
    line = "%s %s fuse.batchfs noauto,user,allow_other,batch_size=8,seed=2,index_dir=%s 0 0\n" % (
        ds_plain.path, mnt, index_dir)
    log = tmp_path / "mount.log"
    with batchfs_on_sh_path(batchfs):
        _edit_fstab(lambda t: t + ("" if t.endswith("\n") or not t else "\n") + line)
        try:
            with open(log, "wb") as lf:
                r = subprocess.run(["mount", str(mnt)], stdin=subprocess.DEVNULL, stdout=lf, stderr=lf,
                                   timeout=MOUNT_DEADLINE)
            assert r.returncode == 0, log.read_text(errors="replace")
            wait_for(lambda: os.path.ismount(str(mnt)) and os.path.exists(str(mnt / "schema.json")),
                     MOUNT_DEADLINE, "mount " + str(mnt))
            s = json.loads((mnt / "schema.json").read_bytes())
            assert s["batch_size"] == 8 and s["seed"] == 2
            assert np.load(str(mnt / "epoch-0000" / "batch-000000" / "x.npy")).shape == (8, 4)
            with open("/proc/self/mountinfo") as f:
                info = [ln for ln in f if " %s " % mnt in ln]
            assert info and "fuse.batchfs" in info[0] and "allow_other" in info[0], info
            r = subprocess.run(["umount", str(mnt)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=MOUNT_DEADLINE)
            assert r.returncode == 0, r.stdout
            wait_for(lambda: not os.path.ismount(str(mnt)), MOUNT_DEADLINE, "umount")
        finally:
            unmount(str(mnt))
            _edit_fstab(lambda t: t.replace(line, "", 1))
    with open(FSTAB) as f:
        assert line not in f.read()
