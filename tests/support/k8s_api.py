#!/usr/bin/env python3
"""A faithful stand-in for the Kubernetes API server, for drainit's tests.

It serves one pod over HTTPS and enforces what the real API server does for
the two requests drainit makes, GET and merge PATCH of
/api/v1/namespaces/NS/pods/NAME:

- the bearer token (401 without a valid one), other paths 404, other
  methods 405;
- PATCH needs `Content-Type: application/merge-patch+json` (415), a JSON
  object body (400), and is applied with RFC 7386 semantics to the pod; a
  `metadata.resourceVersion` in it is a precondition (409 Conflict unless
  the pod is at that version); the result is validated as the API server
  does: annotation values must be strings (400),
  `controller.kubernetes.io/pod-deletion-cost` must be an int32 as the API
  server parses it (no `+`, no leading zero; 422); anything but
  `metadata.annotations` changed is refused (422);
- `metadata.resourceVersion` is bumped with every change of the pod, and
  only then.

Certificates are made at start with `trustme`: an RSA or a P-256 CA; the
CA's PEM goes to DIR/ca.crt (what the pod's service-account directory
holds). The pod can be padded with a large annotation
of someone else's (`--pad-kib`). It can also present a certificate from another CA, or one without
the IP SAN, or one with only a DNS SAN (`--cert dns-san`, for `--dns-name`, an
API server named by `KUBERNETES_SERVICE_HOST`), cap itself at TLS 1.2, and misbehave: answer a scripted status
(401, 403, 404, 409, 422, 429 with Retry-After, 500), drop connections
(`drop`: unanswered; `lost`: a PATCH applied and its answer never sent),
send an endless body, dribble its head, go silent after the handshake, or
answer in plain HTTP without TLS.

Every request is recorded, as one JSON line, in DIR/requests.jsonl: method,
path, query, headers (lower-case names), body, TLS version, the SNI the
client sent (`sni`, null without one; failed handshakes record it too), and
the status sent. The port is written to DIR/port once it listens.

Like the real one it also:
- sends a `Date` header from its own clock, which `--skew S` sets S seconds
  ahead of (or, negative, behind) the machine's;
- ignores the query string where the API does (`?resourceVersion=0`), and
  honours `?dryRun=All` on a PATCH: validated and admitted, answered as if
  applied, nothing stored;
- answers `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`
  with the pod's metadata only;
- serves a spec of the test's (`--spec JSON`, merged over the default: several
  containers, probes, preStop hooks);
- plays an admission policy that allows only some annotation keys
  (`--allowed-keys K1,K2`: a PATCH touching another is refused, 422), and
  one that refuses some annotation values (`--refuse-values JSON`, an
  object of keys to values: a PATCH leaving one of them so is refused,
  422);
- takes commands from DIR/control.jsonl, one JSON object a line, read before
  each request: `{"op": "delete", "grace": N, "at": T}` marks the pod deleted
  at the machine's time T (`deletionTimestamp` = T + skew + N on the server's
  clock, `deletionGracePeriodSeconds` N, or the value of `"period"` when
  given, left out when that is null; a later delete with an earlier
  timestamp moves it, as the API server does); `{"op": "skew", "skew": S}`
  sets the `Date` clock S seconds off the machine's from now on (the
  deletions already made keep their times); `{"op": "force"}` deletes it
  for good (404 from then on); `{"op": "recreate"}` makes it again under a new
  uid (a StatefulSet pod); `{"op": "silent"}` makes every later request go
  unanswered, as `--mode silent` does (a server that hangs mid-run).

    k8s_api.py --dir DIR [--ca rsa|p256] [--cert good|wrong-ca|no-ip-san|dns-san]
               [--host ADDR] [--dns-name NAME]
               [--tls12] [--tokens T1,T2] [--namespace NS] [--pod NAME]
               [--grace N] [--grace-json JSON] [--annotations JSON] [--pad-kib N] [--statuses 401,200,...]
               [--retry-after N] [--skew S] [--spec JSON] [--allowed-keys K1,K2] [--refuse-values JSON]
               [--mode normal|drop|lost|endless|dribble|silent|plaintext]
"""

import argparse
import copy
import email.utils
import json
import os
import socket
import ssl
import threading
import time

import trustme

INT32 = (-(2**31), 2**31 - 1)
COST = "controller.kubernetes.io/pod-deletion-cost"
REASONS = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
    404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
    415: "Unsupported Media Type", 422: "Unprocessable Entity",
    429: "Too Many Requests", 500: "Internal Server Error",
    503: "Service Unavailable",
}
STATUS_REASON = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 409: "Conflict", 415: "UnsupportedMediaType",
    422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
    503: "ServiceUnavailable",
}
PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
# The SNI of the handshake under way on this thread (serve_one's).
HANDSHAKE = threading.local()


def note_sni(_sslobj, server_name, _context):
    HANDSHAKE.sni = server_name


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def valid_cost(value):
    """The API server's check of a pod-deletion-cost: its validFirstDigit
    (no "+", no leading zero; a "-" passes) and strconv.ParseInt(v, 10, 32)."""
    if not value or not (value[0] == "-" or value == "0" or "1" <= value[0] <= "9"):
        return False
    digits = value[1:] if value[0] == "-" else value
    if not digits or not all("0" <= c <= "9" for c in digits):
        return False
    return INT32[0] <= int(value, 10) <= INT32[1]


def status_body(code, message, retry_after=None):
    body = {
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message,
        "reason": STATUS_REASON.get(code, "Unknown"), "code": code,
    }
    if retry_after is not None:
        body["details"] = {"retryAfterSeconds": retry_after}
    return body


class Api:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.tokens = set(t for t in args.tokens.split(",") if t)
        self.statuses = [int(s) for s in args.statuses.split(",") if s]
        self.path = f"/api/v1/namespaces/{args.namespace}/pods/{args.pod}"
        self.pod = {
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {
                "name": args.pod, "namespace": args.namespace,
                "uid": "0b7e6b53-6c1d-4f4e-9d8e-5f0c7c2f9a11",
                "resourceVersion": "1000",
                "labels": {"app": "worker"},
                "annotations": json.loads(args.annotations),
                "managedFields": [{"manager": "kube-controller-manager",
                                   "operation": "Update", "apiVersion": "v1",
                                   "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}}}],
            },
            "spec": {
                "containers": [{"name": "app", "image": "worker:1"}],
                "terminationGracePeriodSeconds": args.grace
                if args.grace_json is None
                else json.loads(args.grace_json),
                "serviceAccountName": "worker",
            },
            "status": {"phase": "Running"},
        }
        self.pod["spec"].update(json.loads(args.spec))
        self.allowed = set(k for k in args.allowed_keys.split(",") if k)
        self.refused_values = json.loads(args.refuse_values)
        self.gone = False
        self.silenced = False
        self.control_at = 0
        self.uids = 0
        if args.pad_kib:
            # Someone else's large annotation (a last-applied configuration).
            self.pod["metadata"]["annotations"]["example.com/padding"] = "x" * (args.pad_kib * 1024)
        if not self.pod["metadata"]["annotations"]:
            del self.pod["metadata"]["annotations"]
        self.log = open(os.path.join(args.dir, "requests.jsonl"), "a", buffering=1)

    def record(self, entry):
        with self.lock:
            self.log.write(json.dumps(entry) + "\n")
            # Whole or not at all: a reader never sees half of it.
            path = os.path.join(self.args.dir, "pod.json")
            with open(path + ".tmp", "w") as f:
                json.dump(self.pod, f)
            os.replace(path + ".tmp", path)

    def now(self):
        """The server's clock."""
        return time.time() + self.args.skew

    def follow_control(self):
        """The test's commands written since the last request."""
        path = os.path.join(self.args.dir, "control.jsonl")
        try:
            with open(path) as f:
                f.seek(self.control_at)
                lines = f.read()
        except OSError:
            return
        done = lines.rfind("\n") + 1
        self.control_at += len(lines[:done].encode())
        for line in lines[:done].splitlines():
            cmd = json.loads(line)
            meta = self.pod["metadata"]
            if cmd["op"] == "delete":
                at = cmd["at"] + self.args.skew + cmd["grace"]
                old = meta.get("deletionTimestamp")
                new = rfc3339(at)
                if old is None or new < old:
                    meta["deletionTimestamp"] = new
                    # A test's own period value (a string, a negative
                    # number; null: none), as a hostile server sends it.
                    period = cmd.get("period", cmd["grace"])
                    if period is None:
                        meta.pop("deletionGracePeriodSeconds", None)
                    else:
                        meta["deletionGracePeriodSeconds"] = period
                    meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
            elif cmd["op"] == "skew":
                self.args.skew = cmd["skew"]
            elif cmd["op"] == "force":
                self.gone = True
            elif cmd["op"] == "silent":
                self.silenced = True
            elif cmd["op"] == "recreate":
                self.uids += 1
                meta["uid"] = f"0b7e6b53-6c1d-4f4e-9d8e-{self.uids:012d}"
                meta.pop("deletionTimestamp", None)
                meta.pop("deletionGracePeriodSeconds", None)
                meta.pop("annotations", None)

    def answer(self, method, path, headers, body):
        """(status, JSON value, extra headers) for one request."""
        path, _, query = path.partition("?")
        params = dict(p.partition("=")[::2] for p in query.split("&") if p)
        with self.lock:
            self.follow_control()
            scripted = self.statuses.pop(0) if self.statuses else None
        if scripted is not None and scripted != 200:
            extra = {}
            retry = None
            if scripted in (429, 503):
                retry = self.args.retry_after
                extra["Retry-After"] = str(retry)
            return scripted, status_body(scripted, f"scripted {scripted}", retry), extra
        auth = headers.get("authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in self.tokens:
            return 401, status_body(401, "Unauthorized"), {}
        if path != self.path or self.gone:
            return 404, status_body(404, f'pods "{path.rsplit("/", 1)[-1]}" not found'), {}
        partial = headers.get("accept", "").replace(" ", "").startswith(PARTIAL)

        def shown(pod):
            if partial:
                return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                        "metadata": copy.deepcopy(pod["metadata"])}
            return copy.deepcopy(pod)
        if method == "GET":
            with self.lock:
                return 200, shown(self.pod), {}
        if method != "PATCH":
            return 405, status_body(405, "the server does not allow this method"), {}
        ctype = headers.get("content-type", "").split(";")[0].strip()
        if ctype != "application/merge-patch+json":
            return 415, status_body(415, f"the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, got {ctype!r}"), {}
        try:
            patch = json.loads(body)
        except ValueError as e:
            return 400, status_body(400, f"error decoding patch: {e}"), {}
        if not isinstance(patch, dict):
            return 400, status_body(400, "patch is not an object"), {}
        with self.lock:
            before = copy.deepcopy(self.pod)
            # A resourceVersion in the patch is a precondition: applied
            # only to that version of the pod (optimistic concurrency).
            wanted = (patch.get("metadata") or {}).get("resourceVersion")
            if wanted is not None and wanted != before["metadata"]["resourceVersion"]:
                return 409, status_body(409, f'Operation cannot be fulfilled on pods "{self.args.pod}": the object has been modified; please apply your changes to the latest version and try again'), {}
            new = merge_patch(self.pod, patch)
            new["metadata"]["resourceVersion"] = before["metadata"]["resourceVersion"]
            annotations = new["metadata"].get("annotations") or {}
            if not isinstance(annotations, dict) or any(
                    not isinstance(v, str) for v in annotations.values()):
                return 400, status_body(400, "json: cannot unmarshal into Go struct field ObjectMeta.metadata.annotations of type string"), {}
            if COST in annotations:
                if not valid_cost(annotations[COST]):
                    return 422, status_body(422, f'Pod "{self.args.pod}" is invalid: metadata.annotations[{COST}]: Invalid value: "{annotations[COST]}": must be a 32bit integer'), {}
            changed_elsewhere = (
                {k: v for k, v in new.items() if k != "metadata"}
                != {k: v for k, v in before.items() if k != "metadata"}
                or {k: v for k, v in new["metadata"].items() if k != "annotations"}
                != {k: v for k, v in before["metadata"].items() if k != "annotations"})
            if changed_elsewhere:
                return 422, status_body(422, f'Pod "{self.args.pod}" is invalid: spec: Forbidden: pod updates may not change fields other than annotations'), {}
            refused = [k for k, v in self.refused_values.items() if annotations.get(k) == v]
            if refused:
                return 422, status_body(422, f"pods \"{self.args.pod}\" is forbidden: ValidatingAdmissionPolicy 'annotation-values' with binding 'annotation-values' denied request: {refused[0]} may not be {self.refused_values[refused[0]]!r}"), {}
            touched = set((patch.get("metadata") or {}).get("annotations") or {})
            if self.allowed and not touched <= self.allowed:
                keys = ", ".join(sorted(touched - self.allowed))
                return 422, status_body(422, f"pods \"{self.args.pod}\" is forbidden: ValidatingAdmissionPolicy 'drainit-annotations' with binding 'drainit-annotations' denied request: drainit may set only its own annotations, not {keys}"), {}
            if "annotations" in new["metadata"] and not new["metadata"]["annotations"]:
                del new["metadata"]["annotations"]
            if new != before:
                new["metadata"]["resourceVersion"] = str(int(before["metadata"]["resourceVersion"]) + 1)
            if params.get("dryRun") == "All":
                return 200, shown(new), {}
            self.pod = new
            return 200, shown(new), {}


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        data += chunk
        if len(data) > 64 * 1024:
            return None
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = conn.recv(4096)
        if not chunk:
            break
        rest += chunk
    return method, path, headers, rest[:length].decode("utf-8", "replace")


def serve_one(api, raw, context):
    if api.args.mode == "plaintext":
        # Not TLS at all: plain HTTP, whatever the client says.
        try:
            raw.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            api.record({"plaintext": raw.recv(4096).hex()})
        except OSError:
            pass
        raw.close()
        return
    HANDSHAKE.sni = None
    try:
        conn = context.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, OSError) as e:
        api.record({"handshake_failed": str(e), "sni": HANDSHAKE.sni})
        raw.close()
        return
    try:
        mode = api.args.mode
        request = read_request(conn)
        if request is None:
            return
        with api.lock:
            api.follow_control()
            if api.silenced:
                mode = "silent"
        method, path, headers, body = request
        entry = {"method": method, "path": path.partition("?")[0],
                 "query": path.partition("?")[2], "headers": headers,
                 "body": body, "tls": conn.version(), "sni": HANDSHAKE.sni}
        if mode == "drop":
            entry["status"] = "dropped"
            api.record(entry)
            return
        if mode == "silent":
            entry["status"] = "silent"
            api.record(entry)
            conn.settimeout(120)
            try:
                conn.recv(1)  # until the client gives up
            except OSError:
                pass
            return
        if mode == "endless":
            entry["status"] = "endless"
            api.record(entry)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n[")
            block = b"0," * 8192
            sent = 0
            try:
                while sent < 1 << 30:
                    conn.sendall(block)
                    sent += len(block)
            except OSError:
                pass
            return
        if mode == "dribble":
            entry["status"] = "dribble"
            api.record(entry)
            try:
                # A head that never ends, one byte at a time.
                for i in range(100000):
                    text = b"HTTP/1.1 200 OK\r\nX-Slow: "
                    conn.sendall(text[i:i + 1] if i < len(text) else b"a")
                    time.sleep(0.05)
            except OSError:
                pass
            return
        status, value, extra = api.answer(method, path, headers, body)
        if mode == "lost" and method == "PATCH":
            # Applied (or refused), and the answer never sent.
            entry["status"] = f"lost {status}"
            api.record(entry)
            return
        entry["status"] = status
        api.record(entry)
        payload = json.dumps(value).encode()
        date = email.utils.formatdate(api.now(), usegmt=True)
        head = f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\nDate: {date}\r\nConnection: close\r\n"
        for name, val in extra.items():
            head += f"{name}: {val}\r\n"
        conn.sendall(head.encode() + b"\r\n" + payload)
        try:
            conn.unwrap()
        except (ssl.SSLError, OSError):
            pass
    except (ssl.SSLError, OSError):
        pass
    finally:
        conn.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--ca", choices=["rsa", "p256"], default="rsa")
    p.add_argument("--cert", choices=["good", "wrong-ca", "no-ip-san", "dns-san"], default="good")
    # The one DNS SAN of `--cert dns-san`.
    p.add_argument("--dns-name", default="localhost")
    p.add_argument("--tls12", action="store_true")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--tokens", default="token-1")
    p.add_argument("--namespace", default="jobs")
    p.add_argument("--pod", default="worker-7d9f-x2")
    p.add_argument("--grace", type=int, default=30)
    # terminationGracePeriodSeconds as raw JSON (a string, an object...).
    p.add_argument("--grace-json", default=None)
    p.add_argument("--annotations", default="{}")
    p.add_argument("--statuses", default="")
    p.add_argument("--pad-kib", type=int, default=0)
    p.add_argument("--retry-after", type=int, default=2)
    p.add_argument("--skew", type=float, default=0.0)
    p.add_argument("--spec", default="{}")
    p.add_argument("--allowed-keys", default="")
    p.add_argument("--refuse-values", default="{}")
    p.add_argument("--mode", default="normal",
                   choices=["normal", "drop", "lost", "endless", "dribble", "silent", "plaintext"])
    args = p.parse_args()

    key = trustme.KeyType.RSA if args.ca == "rsa" else trustme.KeyType.ECDSA
    ca = trustme.CA(key_type=key)
    issuer = trustme.CA(key_type=key) if args.cert == "wrong-ca" else ca
    identity = {"no-ip-san": "localhost", "dns-san": args.dns_name}.get(args.cert, args.host)
    cert = issuer.issue_cert(identity, key_type=key)
    ca.cert_pem.write_to_path(os.path.join(args.dir, "ca.crt"))

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if args.tls12:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    cert.configure_cert(context)
    context.sni_callback = note_sni

    api = Api(args)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((args.host, 0))
    listener.listen(64)
    port_file = os.path.join(args.dir, "port")
    with open(port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    while True:
        raw, _ = listener.accept()
        threading.Thread(target=serve_one, args=(api, raw, context), daemon=True).start()


if __name__ == "__main__":
    main()
