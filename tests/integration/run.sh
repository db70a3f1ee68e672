#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Run the Python integration tests (oracle self-tests, inspect on real files,
# FUSE mounts) with Debian's python. Extra arguments go to pytest.
#   BATCHFS       the batchfs binary (default <repo>/batchfs)
#   BFS_TESTDATA  the shared real TFRecord files (default <repo>/../shared/testdata/real)
#   BFS_GEN       the bfs_gen binary (default tests/gen/bfs_gen when built and fresh,
#                 else compiled with gcc into a temporary dir)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
PY=/usr/bin/python3

if ! $PY -c 'import pytest' 2>/dev/null; then
	echo "run.sh: installing python3-pytest" >&2
	if [ "$(id -u)" = 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y python3-pytest >/dev/null ||
			{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-pytest >/dev/null; }
	else
		echo "run.sh: python3-pytest is missing (apt-get install python3-pytest)" >&2
		exit 1
	fi
fi
for mod in numpy google.protobuf; do
	$PY -c "import $mod" 2>/dev/null || { echo "run.sh: $PY lacks $mod (apt-get install python3-numpy python3-protobuf)" >&2; exit 1; }
done

export BATCHFS="${BATCHFS:-$repo/batchfs}"
export BFS_TESTDATA="${BFS_TESTDATA:-$repo/../shared/testdata/real}"
export PYTHONDONTWRITEBYTECODE=1
cd "$repo"
exec $PY -m pytest -q -p no:cacheprovider -rs tests/integration "$@"
