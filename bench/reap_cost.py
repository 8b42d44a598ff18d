#!/usr/bin/env python3
"""Reap cost per orphan, side by side: each init as PID 1 of a new PID
namespace is stopped (SIGSTOP from outside), its child leaves N orphans
that die and wait as zombies, then the init is let go (SIGCONT) and the CPU
time it spends until no zombie is left is divided by N. The CPU time is
the sum of `/proc/PID/task/*/schedstat` (nanoseconds on a CPU), so the
figure is the inits' own work, not the machine's noise; the inits take
turns in each round and the median of the rounds is reported, with each
init's ratio to tini-static.

Needs root and util-linux `unshare`.

    cargo build --release --target x86_64-unknown-linux-musl
    python3 bench/reap_cost.py [--rounds R] [--orphans N] [LABEL=PATH ...]
"""

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lean import children, wait  # noqa: E402  (the same helpers)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OTHERS = [
    ("tini-static", "/usr/bin/tini-static", []),
    ("catatonit", "/usr/bin/catatonit", []),
    ("dumb-init", "/usr/bin/dumb-init", []),
]


def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def cpu_ns(pid):
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def orphans(pid):
    """The init's children but its own (the app, `sleep`): the orphans it
    has not reaped. Counted from the init's children list only: looking at
    each orphan's own /proc entry would leave the kernel dentries to drop
    at each reap, and make the figure the kernel's."""
    return len(children(pid)) - 1


def one(argv, n):
    """CPU ns per orphan for one run of `argv` as PID 1."""
    d = tempfile.mkdtemp()
    script = (
        f"touch {d}/ready; while [ ! -e {d}/go ]; do sleep 0.01; done; "
        f"i=0; while [ $i -lt {n} ]; do (true &); i=$((i+1)); done; "
        f"touch {d}/made; exec sleep 60"
    )
    outer = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc"] + argv + ["/bin/sh", "-c", script],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait(lambda: os.path.exists(f"{d}/ready"))
        init = wait(lambda: (children(outer.pid) or [None])[0])
        os.kill(init, signal.SIGSTOP)
        wait(lambda: state(init) == "T")
        open(f"{d}/go", "w").close()
        wait(lambda: os.path.exists(f"{d}/made"))
        wait(lambda: orphans(init) >= n)
        # `true` ends at once: give the last of them time to be zombies.
        time.sleep(0.2)
        before = cpu_ns(init)
        os.kill(init, signal.SIGCONT)
        wait(lambda: orphans(init) == 0)
        # Settled: back asleep after the last reap.
        wait(lambda: state(init) == "S")
        return (cpu_ns(init) - before) / n
    finally:
        outer.kill()
        outer.wait()
        subprocess.run(["rm", "-rf", d])


def main():
    args = sys.argv[1:]
    rounds, n = 15, 2000
    while args and args[0].startswith("--"):
        if len(args) < 2:
            sys.exit(f"{args[0]} needs a value")
        flag, value = args[0], args[1]
        args = args[2:]
        if flag == "--rounds":
            rounds = int(value)
        elif flag == "--orphans":
            n = int(value)
    builds = [a.split("=", 1) for a in args] or [
        ["drainit", os.path.join(ROOT, "target/x86_64-unknown-linux-musl/release/drainit")]
    ]
    inits = [(label, path, ["--"]) for label, path in builds]
    inits += [(label, path, a + ["--"]) for label, path, a in OTHERS if os.path.exists(path)]
    costs = {label: [] for label, _, _ in inits}
    for _ in range(rounds):
        for label, path, extra in inits:
            costs[label].append(one([path] + extra, n))
    tini = statistics.median(costs["tini-static"]) if "tini-static" in costs else None
    print(f"reap cost per orphan, {n} zombies reaped at once, median of {rounds} rounds:")
    for label, _, _ in inits:
        m = statistics.median(costs[label])
        lo, hi = min(costs[label]), max(costs[label])
        ratio = f"  {m / tini:.2f}x tini-static" if tini else ""
        print(f"  {label:16} {m / 1000:6.2f} us  ({lo / 1000:.2f}-{hi / 1000:.2f}){ratio}")


if __name__ == "__main__":
    main()
