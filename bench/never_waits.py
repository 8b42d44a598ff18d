#!/usr/bin/env python3
"""Figures for "PID 1 never waits": drainit (the static release build) as
PID 1 of a new PID namespace, with stderr a full pipe nobody reads or a slow
reader, 64 drain sources that answer slowly or never (also under a 5 % CPU
quota and pids.max=16, cgroup v1 or v2), and a flood of stop signals.
Prints one line per figure. Needs root and util-linux `unshare`.

    cargo build --release --target x86_64-unknown-linux-musl
    python3 bench/never_waits.py [path/to/drainit]
"""

import fcntl
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

DRAINIT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..",
    "target/x86_64-unknown-linux-musl/release/drainit")
TMP = tempfile.mkdtemp(prefix="drainit-bench-")
APP = ("trap 'touch {d}/term' TERM; echo $$ > {d}/pid; touch {d}/ready; "
       "while :; do sleep 0.05; done")


def full_pipe():
    r, w = os.pipe()
    fl = fcntl.fcntl(w, fcntl.F_GETFL)
    fcntl.fcntl(w, fcntl.F_SETFL, fl | os.O_NONBLOCK)
    try:
        while True:
            os.write(w, b"x" * 4096)
    except BlockingIOError:
        pass
    try:
        while True:
            os.write(w, b"x")
    except BlockingIOError:
        pass
    fcntl.fcntl(w, fcntl.F_SETFL, fl)
    return r, w


def wait_path(path, timeout=20.0):
    until = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > until:
            raise TimeoutError(path)
        time.sleep(0.0005)
    return time.monotonic()


def drainit_pid(outer):
    until = time.monotonic() + 20
    while time.monotonic() < until:
        try:
            with open(f"/proc/{outer}/task/{outer}/children") as f:
                kids = f.read().split()
            if kids:
                return int(kids[0])
        except OSError:
            pass
        time.sleep(0.001)
    raise TimeoutError("drainit")


def status(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Run:
    """One drainit run: args, an app that traps TERM, optional stderr fd,
    optional cgroup to join before exec."""

    def __init__(self, name, args, stderr=None, cgroups=(), script=APP):
        self.dir = os.path.join(TMP, "".join(c if c.isalnum() else "-" for c in name))
        os.makedirs(self.dir)
        cmd = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
               DRAINIT, *args, "--", "/bin/sh", "-c", script.format(d=self.dir)]

        def join():
            for procs in cgroups:
                with open(procs, "w") as f:
                    f.write(str(os.getpid()))
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=stderr if stderr is not None else subprocess.DEVNULL,
            preexec_fn=join)
        self.pid = drainit_pid(self.proc.pid)
        wait_path(os.path.join(self.dir, "ready"))
        with open(os.path.join(self.dir, "pid")) as f:
            self.app = int(f.read())
        # The app as drainit's namespace numbers it is its child: find the
        # outer pid from drainit's children.
        with open(f"/proc/{self.pid}/task/{self.pid}/children") as f:
            self.app_outer = int(f.read().split()[0])

    def term(self):
        self.sent = time.monotonic()
        os.kill(self.pid, signal.SIGTERM)

    def app_died(self, timeout=30.0):
        until = time.monotonic() + timeout
        while os.path.exists(f"/proc/{self.app_outer}/stat"):
            try:
                with open(f"/proc/{self.app_outer}/stat") as f:
                    if f.read().split(") ")[1][0] == "Z":
                        break
            except OSError:
                break
            if time.monotonic() > until:
                raise TimeoutError("app")
            time.sleep(0.0005)
        return time.monotonic()

    def exit(self, timeout=30.0):
        self.proc.wait(timeout)
        return time.monotonic(), self.proc.returncode


def ms(t):
    return round(t * 1000)


def blocked_stderr(reader):
    r, w = full_pipe()
    run = Run(f"stderr-{reader}", ["-vvvv", "--grace", "3s"], stderr=w)
    os.close(w)
    if reader == "slow":
        def slow():
            while True:
                try:
                    if not os.read(r, 512):
                        return
                except OSError:
                    return
                time.sleep(0.1)
        threading.Thread(target=slow, daemon=True).start()
    run.term()
    got = wait_path(os.path.join(run.dir, "term"))
    died = run.app_died()
    done, code = run.exit()
    print(f"stderr {reader}: TERM reached the app after {ms(got - run.sent)} ms; "
          f"SIGKILL {ms(died - run.sent) - 3000:+d} ms from the 3 s deadline; "
          f"drainit exit {code} after {ms(done - run.sent)} ms")
    os.close(r)


def app_exits_while_blocked():
    r, w = full_pipe()
    run = Run("stderr-exit", ["-vvvv", "--grace", "30s"], stderr=w,
              script="trap 'exit 7' TERM; echo $$ > {d}/pid; touch {d}/ready; "
                     "while :; do sleep 0.05; done")
    os.close(w)
    run.term()
    died = run.app_died()
    done, code = run.exit()
    print(f"stderr blocked, app exits on TERM: drainit exit {code} "
          f"{ms(done - died)} ms after the app")
    os.close(r)


def server(delay):
    """A loopback server: answers busy after `delay` s, or never (None)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1024)
    held = []

    def serve():
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            if delay is None:
                held.append(c)
                continue

            def answer(c=c):
                time.sleep(delay)
                try:
                    c.recv(4096)
                    body = b'{"readyForTermination":false}'
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                              % (len(body), body))
                finally:
                    c.close()
            threading.Thread(target=answer, daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    return s.getsockname()[1]


def cgroup(controller, name, settings):
    """A cgroup (v1 hierarchy `controller`, or v2) with `settings`; the
    path of its procs file, or None when it cannot be made."""
    for base in (f"/sys/fs/cgroup/{controller}", "/sys/fs/cgroup"):
        path = os.path.join(base, name)
        try:
            os.makedirs(path, exist_ok=True)
            for key, value in settings.items():
                with open(os.path.join(path, key), "w") as f:
                    f.write(value)
            return os.path.join(path, "cgroup.procs")
        except OSError:
            continue
    return None


def sources(name, delay, cgroups=()):
    port = server(delay)
    args = ["--grace", "3s"]
    for i in range(64):
        args += ["--drain-url", f"http://127.0.0.1:{port}/d/{i}"]
    run = Run(name, args, cgroups=cgroups)
    idle = status(run.pid, "VmHWM")
    run.term()
    most = 0
    while run.proc.poll() is None:
        most = max(most, status(run.pid, "Threads") or 0)
        time.sleep(0.002)
    done = time.monotonic()
    print(f"64 sources, {name}: exit {run.proc.returncode} {ms(done - run.sent) - 3000:+d} ms "
          f"from the 3 s deadline; at most {most} threads; VmHWM idle {idle} KiB")


def flood():
    run = Run("flood", ["-v", "--pre-stop-delay", "2s", "--grace", "10s"],
              stderr=subprocess.PIPE,
              script="trap 'exit 0' TERM; echo $$ > {d}/pid; touch {d}/ready; "
                     "while :; do sleep 0.05; done")
    for _ in range(20000):
        os.kill(run.pid, signal.SIGTERM)
    out = run.proc.communicate(timeout=30)[1].decode()
    lines = out.splitlines()
    held = sum("holding" in l for l in lines)
    print(f"20,000 stop signals in a 2 s delay: {len(lines)} log lines, {held} 'holding'")


def main():
    print(f"drainit: {DRAINIT} ({os.path.getsize(DRAINIT)} bytes), {os.cpu_count()} cores")
    blocked_stderr("none")
    blocked_stderr("slow")
    app_exits_while_blocked()
    sources("answering after 1.5 s", 1.5)
    sources("never answering", None)
    quota = cgroup("cpu", "drainit-bench-cpu", {"cpu.cfs_quota_us": "5000"}) or \
        cgroup("cpu", "drainit-bench-cpu2", {"cpu.max": "5000 100000"})
    if quota:
        sources("never answering, 5 % CPU", None, cgroups=[quota])
    else:
        print("no cpu cgroup: the 5 % quota run skipped")
    pids = cgroup("pids", "drainit-bench-pids", {"pids.max": "16"})
    if pids:
        sources("never answering, pids.max=16", None, cgroups=[pids])
    else:
        print("no pids cgroup: the pids.max run skipped")
    flood()


if __name__ == "__main__":
    main()
