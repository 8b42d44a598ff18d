#!/usr/bin/env python3
"""Figures for the health listener (`--serve`): drainit (the static release
build) as PID 1 of a new PID namespace with an app that ignores SIGTERM.
Prints one line per figure:

- idle memory with and without --serve (VmHWM, Private_Dirty);
- /readyz latency: from kill(SIGTERM) to the first 503 answer, over runs;
- a flood: 200 idle connections that never send a byte plus 10,000 GETs
  in a tight loop from 4 threads during a stop with a 3 s grace: requests
  answered, VmHWM above idle, and when the app got SIGKILL against the
  deadline (the deadline error).

Needs root and util-linux `unshare`.

    cargo build --release --target x86_64-unknown-linux-musl
    python3 bench/health.py [path/to/drainit]
"""

import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

DRAINIT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..",
    "target/x86_64-unknown-linux-musl/release/drainit")
TMP = tempfile.mkdtemp(prefix="drainit-health-")
# The app ignores TERM and says when it starts; its death is seen from
# outside by a reader of its pipe (EOF when SIGKILL lands).
APP = "trap '' TERM; touch {d}/ready; exec sleep 1000"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait(check, timeout=20.0):
    until = time.monotonic() + timeout
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > until:
            raise TimeoutError(check)
        time.sleep(0.0005)


def get(port, path="/readyz", timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    s.close()
    return int(data[9:12])


def field(pid, name, path="status"):
    with open(f"/proc/{pid}/{path}") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return None


class Run:
    def __init__(self, args):
        self.dir = tempfile.mkdtemp(dir=TMP)
        self.port = free_port()
        cmd = ["unshare", "--pid", "--fork", "--mount-proc", DRAINIT] + args
        cmd += ["--", "/bin/sh", "-c", APP.format(d=self.dir)]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL)
        wait(lambda: os.path.exists(self.dir + "/ready"))
        self.pid = wait(self.find)

    def find(self):
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
                with open(f"/proc/{p}/status") as f:
                    ppid = [l for l in f if l.startswith("PPid:")][0].split()[1]
            except OSError:
                continue
            if argv[0] == DRAINIT.encode() and int(ppid) == self.proc.pid:
                return int(p)
        return None

    def end(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def idle():
    for label, args in [("without --serve", []),
                        ("with --serve", ["--serve", "127.0.0.1:%d"])]:
        port = free_port()
        r = Run([a % port if "%d" in a else a for a in args])
        time.sleep(1.0)
        hwm = field(r.pid, "VmHWM")
        dirty = field(r.pid, "Private_Dirty", "smaps_rollup")
        print(f"idle {label}: VmHWM {hwm} kB, Private_Dirty {dirty} kB")
        r.end()


def readyz_latency(runs=20):
    lat = []
    for _ in range(runs):
        port = free_port()
        r = Run(["--serve", f"127.0.0.1:{port}", "--grace", "5s",
                 "--pre-stop-delay", "2s"])
        wait(lambda: get(port) == 200)
        t0 = time.monotonic()
        os.kill(r.pid, signal.SIGTERM)
        code = get(port)
        lat.append((time.monotonic() - t0) * 1000)
        assert code == 503, code
        r.end()
    lat.sort()
    print(f"/readyz after SIGTERM: 503 at the first request, latency median "
          f"{statistics.median(lat):.2f} ms, max {lat[-1]:.2f} ms ({runs} runs)")


def flood(grace_s=3.0):
    port = free_port()
    r = Run(["--serve", f"127.0.0.1:{port}", "--grace", f"{grace_s}s"])
    wait(lambda: get(port, "/healthz") == 200)
    time.sleep(0.5)
    base = field(r.pid, "VmHWM")
    idle_conns = []
    for _ in range(200):
        try:
            idle_conns.append(socket.create_connection(("127.0.0.1", port)))
        except OSError:
            break
    answered = [0]
    stop = threading.Event()

    def hammer():
        n = 0
        while not stop.is_set() and answered[0] < 10000:
            try:
                get(port, ["/readyz", "/healthz", "/status", "/metrics"][n % 4], 2.0)
                answered[0] += 1
            except (OSError, ValueError):
                pass
            n += 1

    # The app's sleep: its death (SIGKILL at the deadline) is watched here.
    app = wait(lambda: [int(p) for p in os.listdir("/proc") if p.isdigit()
                        and open(f"/proc/{p}/cmdline", "rb").read().startswith(b"sleep\0")
                        and int(open(f"/proc/{p}/status").read().split("PPid:")[1].split()[0]) == r.pid])
    app = app[0]
    peak = [base]

    def sample():
        while not stop.is_set():
            try:
                peak[0] = max(peak[0], field(r.pid, "VmHWM"))
            except (OSError, TypeError):
                return
            time.sleep(0.01)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    threads.append(threading.Thread(target=sample))
    for t in threads:
        t.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    os.kill(r.pid, signal.SIGTERM)
    def gone():
        try:
            with open(f"/proc/{app}/stat") as f:
                return f.read().split(")")[1].split()[0] == "Z"
        except OSError:
            return True

    wait(gone, timeout=grace_s + 10)
    died = (time.monotonic() - t0) * 1000
    stop.set()
    for t in threads:
        t.join()
    r.proc.wait(timeout=10)
    for c in idle_conns:
        c.close()
    hwm = peak[0]
    print(f"flood: {len(idle_conns)} idle connections + {answered[0]} requests "
          f"answered; VmHWM {base} kB idle, {hwm} kB peak "
          f"(+{hwm - base} kB); app SIGKILLed {died:.0f} ms after TERM "
          f"(deadline {grace_s * 1000:.0f} ms, error {died - grace_s * 1000:+.0f} ms)")


def main():
    print(f"drainit: {DRAINIT} ({os.path.getsize(DRAINIT)} bytes)")
    idle()
    readyz_latency()
    flood()


if __name__ == "__main__":
    main()
