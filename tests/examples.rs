//! The platform examples in `examples/` stay true: they parse, their drainit
//! flags are accepted by the real binary, and each grace period ends before
//! the platform's own SIGKILL.

mod support;

use serde_json::Value;
use support::*;

fn seconds(text: &str) -> u64 {
    text.trim_end_matches('s')
        .parse()
        .unwrap_or_else(|_| panic!("seconds in {text:?}"))
}

/// The value after `--grace` in an argument list.
fn grace_of(args: &[String]) -> u64 {
    let i = args
        .iter()
        .position(|a| a == "--grace")
        .expect("--grace is set");
    seconds(&args[i + 1])
}

/// Runs drainit with the example's flags and `/bin/true` instead of the app:
/// exit 0 means every flag was accepted.
fn flags_are_accepted(entrypoint: &[String], vars: &[(&str, &str)]) {
    assert_eq!(entrypoint[0], "/drainit");
    let scratch = Scratch::new("example-flags");
    let flags: Vec<String> = entrypoint[1..]
        .iter()
        .map(|a| {
            a.replace("/dev/termination-log", path_str(&scratch.file("report")))
                .replace(
                    "/tmp/drainit-report.json",
                    path_str(&scratch.file("report")),
                )
        })
        .collect();
    let mut launch = drainit(flags)
        .with_args(vec!["/bin/true".into()])
        .not_pid1();
    for (k, v) in vars {
        launch = launch.env(k, v);
    }
    let (code, stderr) = launch.run();
    assert_eq!(code, 0, "{entrypoint:?}: {stderr}");
}

#[test]
fn ecs_task_definition() {
    let text = std::fs::read_to_string("examples/ecs/task-definition.json").unwrap();
    let task: Value = serde_json::from_str(&text).unwrap();
    let container = &task["containerDefinitions"][0];
    let entrypoint: Vec<String> = serde_json::from_value(container["entryPoint"].clone()).unwrap();
    let stop_timeout = container["stopTimeout"].as_u64().unwrap();
    assert!(stop_timeout <= 120, "Fargate allows at most 120 s");
    assert!(
        grace_of(&entrypoint) < stop_timeout,
        "--grace must end before stopTimeout"
    );
    flags_are_accepted(
        &entrypoint,
        &[("ECS_AGENT_URI", "http://127.0.0.1:1/api/x")],
    );

    let policy: Value = serde_json::from_str(
        &std::fs::read_to_string("examples/ecs/task-role-policy.json").unwrap(),
    )
    .unwrap();
    let actions = policy["Statement"][0]["Action"].to_string();
    assert!(
        actions.contains("ecs:GetTaskProtection") && actions.contains("ecs:UpdateTaskProtection")
    );
}

#[test]
fn kubernetes_deployment() {
    let text = std::fs::read_to_string("examples/kubernetes/deployment.yaml").unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name}"))
            .trim()
            .to_string()
    };
    let period: u64 = field("terminationGracePeriodSeconds:").parse().unwrap();
    // The command is a YAML flow sequence written as a JSON array.
    let command: Vec<String> = serde_json::from_str(&field("command:")).unwrap();
    assert!(
        grace_of(&command) < period,
        "--grace must end before terminationGracePeriodSeconds"
    );
    assert!(command.contains(&"/dev/termination-log".to_string()));
    flags_are_accepted(&command, &[]);
}
