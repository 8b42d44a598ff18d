//! Build script: records the git commit drainit is built from, so that
//! `--version` can say `drainit X.Y.Z - git.<7 hex>`, the form Docker's
//! `docker info` reads from its init binary (tini prints the same shape).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    // Without any rerun-if line cargo would rerun this on every file change;
    // with them it reruns only when HEAD, its ref or the override moves.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DRAINIT_GIT_COMMIT");
    let commit = match std::env::var("DRAINIT_GIT_COMMIT") {
        // For builds from a source tarball whose commit is known.
        Ok(given) if !given.is_empty() => short(&given).unwrap_or_else(|| {
            panic!("DRAINIT_GIT_COMMIT={given:?}: expected at least 7 hex digits or `unknown`")
        }),
        _ => from_git().unwrap_or_else(|| "unknown".into()),
    };
    println!("cargo:rustc-env=DRAINIT_GIT_COMMIT={commit}");
}

/// Exactly 7 hex digits (not `--short`, which grows when a prefix is
/// ambiguous), or `unknown`.
fn short(id: &str) -> Option<String> {
    if id == "unknown" {
        return Some(id.into());
    }
    let id = id.trim();
    (id.len() >= 7 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| id[..7].to_ascii_lowercase())
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn from_git() -> Option<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).canonicalize().ok()?;
    // Only drainit's own checkout counts: a copy vendored inside another
    // repository must not report that repository's commit.
    let top = PathBuf::from(git(&["rev-parse", "--show-toplevel"])?);
    if top.canonicalize().ok()? != manifest {
        return None;
    }
    let git_dir = PathBuf::from(git(&["rev-parse", "--absolute-git-dir"])?);
    let common = manifest.join(git(&["rev-parse", "--git-common-dir"])?);
    let mut watch = vec![git_dir.join("HEAD"), common.join("packed-refs")];
    if let Some(name) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(common.join(name));
    }
    // A path that does not exist would make cargo rerun this every build.
    for path in watch.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    short(&git(&["rev-parse", "HEAD"])?)
}
