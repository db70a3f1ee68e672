# SPDX-License-Identifier: Apache-2.0
"""``python3 -m batchfs ARGS`` runs the batchfs binary with ARGS: the same
commands, options, output and exit status (the process is replaced by it,
so signals reach the daemon itself)."""

import os
import sys

from . import BatchfsError, find_binary


def main() -> None:
    """Replace this process with ``batchfs ARGS`` (exit 127 when not found)."""
    try:
        exe = find_binary()
    except BatchfsError as e:
        print("batchfs: %s" % e, file=sys.stderr)
        sys.exit(127)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, ["batchfs"] + sys.argv[1:])


if __name__ == "__main__":
    main()
