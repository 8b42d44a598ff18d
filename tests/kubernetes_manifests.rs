//! Every Kubernetes manifest in `examples/kubernetes/` and in the docs is
//! checked against Kubernetes' published schemas (the `kubernetes-validate`
//! package, strict, for 1.30 and the newest version it knows), the objects
//! docs/kubernetes.md shows are exactly those of
//! `examples/kubernetes/protect.yaml`, and the admission policy there lets
//! drainit's service account change the three annotations of its own pod
//! and drainit's record of the template's values, and nothing else (its
//! CEL evaluated by the `cel-python` interpreter against admission
//! requests). The work is done by
//! `tests/support/k8s_manifests.py`; this file asserts on its answer.
//! Without those packages (and PyYAML) the check skips with a line, or
//! fails under `DRAINIT_REQUIRE_K8S_PYTHON=1`.

mod support;

use std::process::Command;

use serde_json::Value;

/// The script's answer, or None (with the skip line) when python3 lacks
/// its packages.
fn checked() -> Option<Value> {
    if !support::or_skip(
        support::python_imports("celpy, kubernetes_validate, yaml"),
        "Kubernetes manifest checks",
        "python3 cannot import celpy, kubernetes_validate and yaml \
         (pip install cel-python kubernetes-validate pyyaml)",
        "DRAINIT_REQUIRE_K8S_PYTHON",
    ) {
        return None;
    }
    let out = Command::new("python3")
        .arg("tests/support/k8s_manifests.py")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "k8s_manifests.py failed (pip install kubernetes-validate cel-python): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn manifests_pass_the_published_schemas_and_the_policy_holds() {
    let Some(v) = checked() else {
        return;
    };
    assert_eq!(v["failures"], serde_json::json!([]), "{v:#}");
    let validated: Vec<&str> = v["validated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    for expected in [
        "examples/kubernetes/deployment.yaml: Deployment/worker",
        "examples/kubernetes/protect.yaml: ServiceAccount/worker",
        "examples/kubernetes/protect.yaml: Role/drainit-protect",
        "examples/kubernetes/protect.yaml: RoleBinding/drainit-protect",
        "examples/kubernetes/protect.yaml: ValidatingAdmissionPolicy/drainit-protect",
        "examples/kubernetes/protect.yaml: ValidatingAdmissionPolicyBinding/drainit-protect",
        "examples/kubernetes/protect.yaml: Deployment/worker",
        "docs/kubernetes.md: ValidatingAdmissionPolicy/drainit-protect",
        "docs/kubernetes.md: Deployment/worker",
    ] {
        assert!(
            validated.contains(&expected),
            "{expected} in {validated:#?}"
        );
    }
    assert_eq!(v["broken_refused"], true, "a misspelt field must fail");
    assert_eq!(v["docs_match_example"], true);

    let policy = &v["policy"];
    for allowed in [
        "busy on its own pod",
        "idle on its own pod",
        "busy on a pod without annotations",
        "idle back to no annotations",
        "another user changes the image",
        "busy with drainit's record",
        "idle restores the template",
    ] {
        assert_eq!(policy[allowed], true, "{allowed}: {policy:#}");
    }
    for denied in [
        "another pod",
        "a token bound to no pod",
        "another annotation changed",
        "another annotation removed",
        "another annotation added",
        "a label changed",
        "the image changed",
        "another drainit.dev annotation",
    ] {
        assert_eq!(policy[denied], false, "{denied}: {policy:#}");
    }
}

#[test]
fn the_example_asks_for_exactly_get_and_patch_on_pods() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/kubernetes/protect.yaml"
    ))
    .unwrap();
    assert!(text.contains("resources: [\"pods\"]\n    verbs: [\"get\", \"patch\"]"));
    // POD_NAME from the Downward API, and no --grace (it comes from the pod).
    assert!(text.contains("- name: POD_NAME\n              valueFrom:\n                fieldRef:\n                  fieldPath: metadata.name"));
    let command = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("command:"))
        .unwrap();
    assert!(command.contains("\"--k8s-protect\""), "{command}");
    assert!(!command.contains("--grace"), "{command}");
}
