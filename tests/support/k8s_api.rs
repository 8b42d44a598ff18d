//! The fake Kubernetes API server (`k8s_api.py`) as the tests drive it:
//! started with a CA of its own and the tokens `token-1` and `token-2`,
//! killed on drop, and what it saw and holds.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::{or_skip, python_imports, Scratch};

/// True when python3 has what the fake server makes its certificates
/// with (`trustme`, on `cryptography`); otherwise the test skips with a
/// line, or fails under `DRAINIT_REQUIRE_K8S_PYTHON=1`.
pub fn available() -> bool {
    or_skip(
        python_imports("trustme, cryptography"),
        "Kubernetes API tests",
        "python3 cannot import trustme and cryptography (pip install trustme cryptography)",
        "DRAINIT_REQUIRE_K8S_PYTHON",
    )
}

/// The fake API server, killed on drop.
pub struct FakeApi {
    child: Child,
    /// Where it writes its port, CA, requests and pod.
    pub dir: Scratch,
    pub port: u16,
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl FakeApi {
    /// Starts it with `args` (see `k8s_api.py --help`) and waits for its port.
    pub fn start(args: &[&str]) -> FakeApi {
        let dir = Scratch::new("k8s-api");
        let child = Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/support/k8s_api.py"
            ))
            .arg("--dir")
            .arg(&dir.path)
            .args(["--tokens", "token-1,token-2"])
            .args(args)
            .stdin(Stdio::null())
            .spawn()
            .expect("python3 runs the fake API server");
        let port = dir.wait_number("port");
        FakeApi { child, dir, port }
    }

    /// The pod as the server holds it now.
    pub fn pod(&self) -> Value {
        serde_json::from_str(&self.dir.read("pod.json")).unwrap()
    }

    /// Every request it has answered or held, in order (handshake
    /// failures apart).
    pub fn requests(&self) -> Vec<Value> {
        fs::read_to_string(self.dir.file("requests.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|v| v.get("method").is_some())
            .collect()
    }

    /// Fills `sa` as a service-account directory for this server: its CA,
    /// `token-1`, namespace `jobs`.
    pub fn fill_service_account(&self, sa: &Path) {
        fs::create_dir_all(sa).unwrap();
        fs::copy(self.dir.file("ca.crt"), sa.join("ca.crt")).unwrap();
        fs::write(sa.join("token"), "token-1\n").unwrap();
        fs::write(sa.join("namespace"), "jobs").unwrap();
    }

    /// One command for the server (see `k8s_api.py`), taken before its
    /// next request.
    fn control(&self, command: &Value) {
        use std::io::Write;
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.file("control.jsonl"))
            .unwrap();
        writeln!(f, "{command}").unwrap();
    }

    /// Marks the pod deleted now with `grace` seconds, as `kubectl delete
    /// --grace-period` does (a second, shorter one moves the kill earlier).
    pub fn delete(&self, grace: u64) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        self.control(&serde_json::json!({"op": "delete", "grace": grace, "at": now}));
    }

    /// Marks the pod deleted now with its kill `grace` seconds out and
    /// `deletionGracePeriodSeconds` the JSON value `period` (null: none),
    /// as a hostile or broken API server may say it.
    pub fn delete_with_period(&self, grace: u64, period: Value) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        self.control(
            &serde_json::json!({"op": "delete", "grace": grace, "at": now, "period": period}),
        );
    }

    /// The server's `Date` clock `skew` seconds off the machine's from
    /// now on (another API server replica's, a hostile server's).
    pub fn skew(&self, skew: f64) {
        self.control(&serde_json::json!({"op": "skew", "skew": skew}));
    }

    /// Deletes the pod for good (`--force --grace-period=0`): 404 from now.
    pub fn force_delete(&self) {
        self.control(&serde_json::json!({"op": "force"}));
    }

    /// Answers no request from now on (each held until the client gives
    /// up), as a server that hangs mid-run.
    pub fn go_silent(&self) {
        self.control(&serde_json::json!({"op": "silent"}));
    }

    /// Makes the pod again under a new uid (a StatefulSet pod after a
    /// force delete).
    pub fn recreate(&self) {
        self.control(&serde_json::json!({"op": "recreate"}));
    }
}
