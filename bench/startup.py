#!/usr/bin/env python3
"""Start-up of static inits side by side, interleaved: each round runs every
`INIT -- /bin/true` once in turn (and `/bin/true` alone), so a noisy
neighbour slows them all alike. Prints the median overhead over /bin/true
of each init, its ratio to tini-static, the system calls each makes to run
/bin/true (`strace -f -c`, the child's own included, /bin/true's
subtracted) and the binary sizes.

Usage: bench/startup.py [ROUNDS] NAME=PATH [NAME=PATH ...]
  e.g. bench/startup.py 2000 before=/tmp/base/drainit after=target/x86_64-unknown-linux-musl/release/drainit
tini-static (`tini -s`), catatonit and dumb-init join when installed.
Run as root or not: drainit is not PID 1 here (like the other inits, it
only runs its child); `bench/run.sh` measures the rest as PID 1.
"""
import os
import re
import statistics
import subprocess
import sys
import time

TRUE = "/bin/true"


def inits(argv):
    rounds = 1000
    named = []
    for arg in argv:
        if arg.isdigit():
            rounds = int(arg)
        else:
            name, path = arg.split("=", 1)
            named.append((name, [os.path.abspath(path), "--", TRUE]))
    for name, path, flags in [
        ("tini-static", "/usr/bin/tini-static", ["-s"]),
        ("catatonit", "/usr/bin/catatonit", []),
        ("dumb-init", "/usr/bin/dumb-init", []),
    ]:
        if os.path.exists(path):
            named.append((name, [path, *flags, "--", TRUE]))
    return rounds, named


def run(cmd):
    start = time.perf_counter_ns()
    subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter_ns() - start) / 1000.0


def syscalls(cmd):
    """Total calls in `strace -f -c` of cmd (all processes)."""
    out = subprocess.run(["strace", "-f", "-c", "-o", "/dev/stdout", *cmd],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, check=False).stdout
    total = re.search(r"^100\.00\s+\S+\s+\S+\s+(\d+)", out, re.M)
    if total:
        return int(total.group(1))
    lines = [l for l in out.splitlines() if l.strip().endswith("total")]
    return int(lines[-1].split()[3]) if lines else -1


def main():
    rounds, named = inits(sys.argv[1:])
    times = {name: [] for name, _ in named}
    bare = []
    for _ in range(rounds // 10):  # warm-up
        for _, cmd in named:
            run(cmd)
    for _ in range(rounds):
        bare.append(run([TRUE]))
        for name, cmd in named:
            times[name].append(run(cmd))
    base = statistics.median(bare)
    over = {name: statistics.median(t) - base for name, t in times.items()}
    tini = over.get("tini-static")
    true_calls = syscalls([TRUE])
    print(f"{rounds} interleaved rounds; /bin/true alone {base:.0f} us; "
          f"/bin/true makes {true_calls} system calls")
    print("| init | start-up overhead (median) | vs tini-static | system calls to run /bin/true | binary bytes |")
    print("| --- | --- | --- | --- | --- |")
    for name, cmd in named:
        ratio = f"{over[name] / tini:.2f}x" if tini else "-"
        calls = syscalls(cmd)
        calls = calls - true_calls if calls > true_calls else "-"
        size = os.path.getsize(cmd[0])
        print(f"| {name} | {over[name]:.0f} us | {ratio} | {calls} | {size:,} |")


if __name__ == "__main__":
    main()
