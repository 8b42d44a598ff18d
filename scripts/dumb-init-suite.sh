#!/bin/sh
# Runs dumb-init's own test suite (pytest) against a binary installed under
# the name `dumb-init`, e.g. drainit. Fetches nothing: SUITE is a dumb-init
# source tree the caller already has (its tests/ and testing/ folders), and
# PYTHON a Python with pytest, pytest-timeout and py installed.
#
#   scripts/dumb-init-suite.sh SUITE BINARY [PYTHON] [-- PYTEST ARGS...]
#
# The binary is copied (not linked: the suite's cwd test resolves links)
# as `dumb-init` into a temporary directory put first on PATH. pytest runs
# in a fresh PID namespace (needs root and util-linux `unshare`) under a
# neutral PID 1 that only reaps, so the test machine's own zombies and
# orphans do not count, and the tested binary is not PID 1, as in
# dumb-init's own CI. The exit status is pytest's.
set -eu

if [ $# -lt 2 ]; then
    echo "usage: $0 SUITE BINARY [PYTHON] [-- PYTEST ARGS...]" >&2
    exit 2
fi
suite=$(cd "$1" && pwd)
binary=$2
shift 2
python=python3
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    python=$1
    shift
fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift

if [ ! -d "$suite/tests" ] || [ ! -d "$suite/testing" ]; then
    echo "$0: $suite has no tests/ and testing/ folders" >&2
    exit 2
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cp "$binary" "$bin/dumb-init"
chmod 755 "$bin/dumb-init"

cd "$suite"
# PID 1: starts pytest and reaps every process until pytest is gone.
PATH="$bin:$PATH" unshare --pid --fork --mount-proc "$python" -c '
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
while True:
    try:
        done, status = os.waitpid(-1, 0)
    except ChildProcessError:
        sys.exit(1)
    if done == pid:
        sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
' "$python" -m pytest -p no:cacheprovider "$@"
