#!/usr/bin/env python3
"""Start-up figures of one or more drainit builds side by side with
tini-static, dumb-init and catatonit, for A/B comparisons of start-up work
(see docs/design/performance.md, "Start-up: help, arena, floats"):

- start-up: the median wall time of `INIT -- /bin/true` minus that of
  `/bin/true` alone, stderr a pipe as in a container, every command taking
  its turn in each round (interleaved, so a noisy neighbour slows them all
  alike), and each drainit's ratio to tini-static;
- idle Private_Dirty (`/proc/PID/smaps_rollup`, after `sync`: a freshly
  copied binary's page-cache pages count as private dirty until written
  back) of each init as PID 1 of a new PID namespace with a sleeping
  child, with drainit's share per mapping (stack, .bss, heap, threads);
  drainit also with `--serve`;
- allocator syscalls (brk, mmap, munmap, mremap) and all syscalls the init
  makes to run `/bin/true`, from `strace -f`, the child's own after its
  execve left out.

Needs root, util-linux `unshare` and strace.

    cargo build --release --target x86_64-unknown-linux-musl
    python3 bench/lean.py [--runs N] [LABEL=PATH ...]

Without LABEL=PATH, the static release build is measured as `drainit`.
"""

import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OTHERS = [
    ("tini-static", "/usr/bin/tini-static", ["-s"]),
    ("dumb-init", "/usr/bin/dumb-init", []),
    ("catatonit", "/usr/bin/catatonit", []),
]
ALLOC = {"brk", "mmap", "munmap", "mremap"}


def wait(check, timeout=20.0):
    until = time.monotonic() + timeout
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > until:
            raise TimeoutError(check)
        time.sleep(0.001)


def run_once(argv):
    """One run's wall time in us: stdin and stdout /dev/null, stderr a pipe
    (as a container's is; nothing is written to it at the default
    verbosity)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    read, write = os.pipe()
    start = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, os.environ,
                         file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0),
                                       (os.POSIX_SPAWN_DUP2, devnull, 1),
                                       (os.POSIX_SPAWN_DUP2, write, 2)])
    _, status = os.waitpid(pid, 0)
    elapsed = time.perf_counter_ns() - start
    for fd in (devnull, read, write):
        os.close(fd)
    if status != 0:
        raise RuntimeError(f"{argv} failed: {status}")
    return elapsed / 1000.0


def startup(inits, runs):
    cmds = [[path] + flags + ["--", "/bin/true"] for _, path, flags in inits]
    cmds.append(["/bin/true"])
    times = [[] for _ in cmds]
    for _ in range(runs):
        for cmd, t in zip(cmds, times):
            t.append(run_once(cmd))
    medians = [statistics.median(t) for t in times]
    bare = medians[-1]
    return bare, [m - bare for m in medians[:-1]]


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def smaps(pid):
    """Private_Dirty in kB: the total, and per mapping name."""
    total, parts, name, after_rw = 0, {}, None, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                name = head[5] if len(head) > 5 else "[anon]"
                if name.startswith("/"):
                    name = os.path.basename(name)
                    if head[1].startswith("rw"):
                        name, after_rw = name + " rw", True
                elif name == "[anon]" and after_rw:
                    # The binary's .bss beyond its last file page.
                    name = ".bss"
                if name != ".bss" and not name.endswith(" rw"):
                    after_rw = False
            elif head[0] == "Private_Dirty:":
                kb = int(head[1])
                total += kb
                if kb:
                    parts[name] = parts.get(name, 0) + kb
    return total, parts


def idle(path, flags):
    """Private_Dirty of `path` as PID 1 with a sleeping child."""
    cmd = ["unshare", "--pid", "--fork", "--mount-proc", path] + flags
    cmd += ["--", "sleep", "600"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        pid = wait(lambda: (children(proc.pid) or [None])[0])

        def sleeping():
            for kid in children(pid):
                with open(f"/proc/{kid}/comm") as f:
                    if f.read().strip() == "sleep":
                        return True
            return False

        wait(sleeping)
        time.sleep(0.3)
        os.sync()
        time.sleep(0.2)
        with open(f"/proc/{pid}/smaps_rollup") as f:
            rollup = [int(l.split()[1]) for l in f
                      if l.startswith("Private_Dirty:")][0]
        _, parts = smaps(pid)
        with open(f"/proc/{pid}/status") as f:
            threads = [int(l.split()[1]) for l in f
                       if l.startswith("Threads:")][0]
        return rollup, parts, threads
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, UnboundLocalError):
            pass
        proc.wait()


def syscalls(path, flags):
    """(allocator syscalls, all syscalls) the init makes for /bin/true."""
    with tempfile.NamedTemporaryFile(suffix=".strace") as out:
        subprocess.run(["strace", "-f", "-qq", "-o", out.name, path] + flags
                       + ["--", "/bin/true"], check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        with open(out.name) as f:
            lines = f.read().splitlines()
    gone = set()
    alloc = total = 0
    for line in lines:
        m = re.match(r"^(\d+)\s+(?:<\.\.\. )?(\w+)", line)
        if not m:
            continue
        pid, call = m.group(1), m.group(2)
        if pid in gone or "resumed>" in line:
            continue
        if line.split(None, 1)[1].startswith('execve("/bin/true"'):
            gone.add(pid)
            continue
        if call == "exit_group" or call == "exit":
            continue
        total += 1
        if call in ALLOC:
            alloc += 1
    return alloc, total


def main():
    args = sys.argv[1:]
    runs = 300
    if args[:1] == ["--runs"]:
        runs, args = int(args[1]), args[2:]
    builds = [a.split("=", 1) for a in args] or [[
        "drainit",
        os.path.join(ROOT, "target/x86_64-unknown-linux-musl/release/drainit")]]
    drainits = [(label, os.path.abspath(path), []) for label, path in builds]
    inits = drainits + [o for o in OTHERS if os.path.exists(o[1])]
    tini = next(i for i, o in enumerate(inits) if o[0] == "tini-static")
    print(f"machine: {os.cpu_count()} cores, {os.uname().release}, "
          f"load {os.getloadavg()[0]:.1f}; {runs} interleaved rounds")
    bare, over = startup(inits, runs)
    print(f"\nstart-up over /bin/true ({bare:.0f} us), median:")
    for (label, _, _), us in zip(inits, over):
        print(f"  {label:14} {us:7.0f} us  {us / over[tini]:.2f}x tini-static")
    print("\nidle Private_Dirty (kB), sleeping child, after sync:")
    for label, path, flags in inits:
        variants = [("", flags)]
        if (label, path, flags) in drainits:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            variants.append((" --serve", ["--serve", f"127.0.0.1:{port}"]))
        for suffix, fl in variants:
            rollup, parts, threads = idle(path, fl)
            top = sorted(parts.items(), key=lambda kv: -kv[1])[:6]
            detail = ", ".join(f"{k} {v}" for k, v in top)
            print(f"  {label + suffix:22} {rollup:4} kB, {threads} thread(s)"
                  f"  ({detail})")
    print("\nsyscalls to run /bin/true (the child's after its execve left out):")
    for label, path, flags in inits:
        alloc, total = syscalls(path, flags)
        print(f"  {label:14} {total:4} in all, {alloc:3} brk/mmap/munmap/mremap")
    sizes = ", ".join(f"{label} {os.path.getsize(path):,}"
                      for label, path, _ in inits)
    print(f"\nsize (bytes): {sizes}")


if __name__ == "__main__":
    main()
