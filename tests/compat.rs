//! What users coming from dumb-init and Docker's `--init` rely on, run on the
//! real binary: dumb-init's `-c`/`--single-child`, `-V` and `DUMB_INIT_SETSID`,
//! and a `--version` line that names the commit it was built from.

mod support;

use std::process::Command;

use support::*;

/// The child traps USR1; a grandchild `sleep` shares its process group.
/// Returns whether USR1, sent to drainit, reached the grandchild too.
fn usr1_reaches_the_grandchild(flags: &[&str], vars: &[(&str, &str)]) -> bool {
    let scratch = Scratch::new("compat-group");
    let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    args.extend(sh(&scratch, GROUP_CHILD));
    let mut launch = drainit(args);
    for (k, v) in vars {
        launch = launch.env(k, v);
    }
    usr1_reached_the_grandchild(launch.start(), &scratch)
}

#[test]
fn single_child_is_accepted_and_beats_the_group_variables() {
    assert!(!usr1_reaches_the_grandchild(&["-c"], &[]));
    assert!(!usr1_reaches_the_grandchild(
        &["--single-child"],
        &[
            ("DRAINIT_KILL_PROCESS_GROUP", "1"),
            ("DUMB_INIT_SETSID", "1")
        ]
    ));
}

#[test]
fn dumb_init_setsid_0_is_the_child_only_and_1_is_the_group() {
    assert!(!usr1_reaches_the_grandchild(
        &[],
        &[("DUMB_INIT_SETSID", "0")]
    ));
    assert!(usr1_reaches_the_grandchild(
        &[],
        &[("DUMB_INIT_SETSID", "1")]
    ));
    // The control: without either, the group is reached only with -g.
    assert!(usr1_reaches_the_grandchild(&["-g"], &[]));
}

#[test]
fn single_child_with_g_is_a_usage_error() {
    assert_usage_error(&["-c", "-g"], &[], "--single-child");
}

#[test]
fn version_names_the_commit_in_the_form_docker_reads() {
    let out = Command::new(DRAINIT).arg("--version").output().unwrap();
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout[..7]).into_owned())
        .unwrap_or_else(|| "unknown".into());
    assert_eq!(
        line,
        format!("drainit {} - git.{commit}\n", env!("CARGO_PKG_VERSION"))
    );
}
