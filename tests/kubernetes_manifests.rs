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
        "examples/kubernetes/pdb.yaml: PodDisruptionBudget/worker",
        "examples/kubernetes/protect.yaml: ServiceAccount/worker",
        "examples/kubernetes/protect.yaml: Role/drainit-protect",
        "examples/kubernetes/protect.yaml: RoleBinding/drainit-protect",
        "examples/kubernetes/protect.yaml: ValidatingAdmissionPolicy/drainit-protect",
        "examples/kubernetes/protect.yaml: ValidatingAdmissionPolicyBinding/drainit-protect",
        "examples/kubernetes/protect.yaml: Deployment/worker",
        "examples/kubernetes/preflight-job.yaml: Job/worker-preflight",
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

/// The preflight Job is the Deployment's pod template, as a run would be,
/// with the check turned on and no restart: same service account, grace,
/// container name, image, command and variables; its own label.
#[test]
fn the_preflight_job_is_the_deployment_s_pod_with_the_check_on() {
    if !support::or_skip(
        support::python_imports("yaml"),
        "the preflight Job's comparison",
        "python3's yaml is missing",
        "DRAINIT_REQUIRE_K8S_PYTHON",
    ) {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| yaml_documents(&std::fs::read_to_string(root.join(p)).unwrap());
    let deployment = read("examples/kubernetes/protect.yaml")
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap();
    let job = read("examples/kubernetes/preflight-job.yaml").remove(0);
    assert_eq!(job["kind"], "Job");
    assert_eq!(
        job["metadata"]["namespace"],
        deployment["metadata"]["namespace"]
    );
    assert_eq!(
        job["spec"]["backoffLimit"], 0,
        "one try: a check, not a service"
    );
    let mut want = deployment["spec"]["template"]["spec"].clone();
    want["restartPolicy"] = "Never".into();
    want["containers"][0]["env"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"name": "DRAINIT_CHECK", "value": "1"}));
    assert_eq!(job["spec"]["template"]["spec"], want);
    assert_ne!(
        job["spec"]["template"]["metadata"]["labels"],
        deployment["spec"]["template"]["metadata"]["labels"],
        "the Deployment's Services and budget must not count the check's pod"
    );
}

/// YAML documents as JSON values (PyYAML), in order.
fn yaml_documents(text: &str) -> Vec<Value> {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d]))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "PyYAML could not read the YAML");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `examples/kubernetes/protect/`, a kustomize component, built offline by
/// `kubectl kustomize` into an overlay with two Deployments of its own:
/// the one labelled `drainit.dev/protect: "true"` gains the service
/// account, POD_NAME and DRAINIT_K8S_CONTAINER (its own variables kept),
/// the other stays as it was, and the access and
/// policy objects are exactly those of `protect.yaml` (and so of the docs).
#[test]
fn the_kustomize_component_adds_protection_to_a_deployment() {
    if !support::or_skip(
        support::has_command("kubectl") && support::python_imports("yaml"),
        "the kustomize component",
        "kubectl (its kustomize builds offline) or python3's yaml is missing",
        "DRAINIT_REQUIRE_KUBECTL",
    ) {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // Inside the repository, two levels down: kustomize takes a component
    // only by a relative path.
    let overlay = root
        .join("target")
        .join(format!("kustomize-{}", std::process::id()));
    std::fs::create_dir_all(&overlay).unwrap();
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "resources:\n  - app.yaml\n  - web.yaml\ncomponents:\n  - ../../examples/kubernetes/protect\n",
    )
    .unwrap();
    std::fs::write(
        overlay.join("app.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: queue\n  namespace: jobs\n  \
         labels:\n    drainit.dev/protect: \"true\"\nspec:\n  selector:\n    matchLabels:\n      app: queue\n  template:\n    metadata:\n      \
         labels:\n        app: queue\n    spec:\n      containers:\n        - name: worker\n          \
         image: registry.example.com/queue:1\n          command: [\"/drainit\", \"--k8s-protect\", \
         \"--drain-url\", \"http://127.0.0.1:8080/drain\", \"--\"]\n          args: [\"/app/queue\"]\n          \
         env:\n            - name: QUEUE\n              value: jobs-high\n        - name: metrics\n          \
         image: registry.example.com/exporter:1\n",
    )
    .unwrap();
    // A second Deployment without the label: the component leaves it as
    // it is (no service account, no variables, no image-less container).
    let web = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: jobs\n\
         spec:\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      \
         labels:\n        app: web\n    spec:\n      containers:\n        - name: web\n          \
         image: registry.example.com/web:1\n";
    std::fs::write(overlay.join("web.yaml"), web).unwrap();
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(&overlay)
        .output()
        .expect("kubectl runs");
    let _ = std::fs::remove_dir_all(&overlay);
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let built = yaml_documents(&String::from_utf8_lossy(&out.stdout));
    let named = |docs: &[Value], kind: &str| -> Value {
        docs.iter()
            .find(|d| d["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} in {docs:#?}"))
    };
    let deployment = built
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "queue")
        .cloned()
        .unwrap_or_else(|| panic!("no Deployment queue in {built:#?}"));
    let web_built = built
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "web")
        .cloned()
        .unwrap_or_else(|| panic!("no Deployment web in {built:#?}"));
    assert_eq!(
        web_built,
        yaml_documents(web)[0],
        "the unlabelled Deployment changed"
    );
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "worker");
    let worker = &pod["containers"][0];
    assert_eq!(worker["name"], "worker");
    let env = worker["env"].as_array().unwrap();
    let var = |name: &str| env.iter().find(|e| e["name"] == name).cloned();
    assert_eq!(var("QUEUE").unwrap()["value"], "jobs-high", "{env:#?}");
    assert_eq!(
        var("POD_NAME").unwrap()["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    assert_eq!(var("DRAINIT_K8S_CONTAINER").unwrap()["value"], "worker");
    assert_eq!(
        pod["containers"][1]["env"],
        Value::Null,
        "only drainit's container"
    );

    let example = yaml_documents(
        &std::fs::read_to_string(root.join("examples/kubernetes/protect.yaml")).unwrap(),
    );
    for kind in [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        assert_eq!(named(&built, kind), named(&example, kind), "{kind}");
    }
    assert_eq!(built.len(), 7, "{built:#?}");
}
