#!/usr/bin/env python3
"""The Kubernetes manifests of drainit's docs and examples, checked.

Run from the repository's root; prints one JSON object for
tests/kubernetes_manifests.rs to assert on:

- "validated": "file: kind/name" for every manifest (each document of
  examples/kubernetes/*.yaml, and each ```yaml block of docs/*.md that is a
  whole object, with a top-level apiVersion), after it passed Kubernetes'
  published schemas (the kubernetes-validate package) in strict mode for
  1.30 (the first with ValidatingAdmissionPolicy v1) and the newest known;
- "failures": the ones that did not, with the validator's message;
- "broken_refused": a copy of the first Deployment with a misspelt field is
  refused (so a pass means something);
- "docs_match_example": the objects docs/kubernetes.md shows are exactly
  the documents of examples/kubernetes/protect.yaml, in order;
- "policy": the ValidatingAdmissionPolicy of protect.yaml evaluated (with
  the cel-python CEL interpreter) against admission requests: for each
  case, whether the API server would let it through.
"""

import copy
import glob
import json
import re
import sys

import celpy
import kubernetes_validate
import yaml

VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]


def documents():
    """(where, object) for every manifest."""
    found = []
    for path in sorted(glob.glob("examples/kubernetes/*.yaml")):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    found.append((path, doc))
    for path in sorted(glob.glob("docs/*.md")):
        text = open(path).read()
        for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
            if re.search(r"^apiVersion:", block, re.M):
                for doc in yaml.safe_load_all(block):
                    if doc:
                        found.append((path, doc))
    return found


def validate(doc):
    """None, or the first validator's complaint."""
    for version in VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            return f"{version}: {e.message} at {list(e.path)}"
        except Exception as e:  # a schema it lacks
            return f"{version}: {e}"
    return None


def policy_cases(policy):
    """Each admission request drainit's policy meets, and its verdict."""
    env = celpy.Environment()
    spec = policy["spec"]

    def run(expression, activation):
        return bool(env.program(env.compile(expression)).evaluate(activation))

    def admitted(old, new, username, pod_name):
        extra = {} if pod_name is None else {
            "authentication.kubernetes.io/pod-name": [pod_name]}
        activation = {
            "object": celpy.json_to_cel(new),
            "oldObject": celpy.json_to_cel(old),
            "request": celpy.json_to_cel({
                "operation": "UPDATE",
                "userInfo": {"username": username, "extra": extra}}),
        }
        if not all(run(c["expression"], activation)
                   for c in spec.get("matchConditions", [])):
            return True  # the policy does not apply
        variables = {}
        for v in spec.get("variables", []):
            act = dict(activation, variables=celpy.json_to_cel(variables))
            variables[v["name"]] = json.loads(json.dumps(
                run_value(env, v["expression"], act)))
        activation["variables"] = celpy.json_to_cel(variables)
        return all(run(v["expression"], activation) for v in spec["validations"])

    sa = "system:serviceaccount:jobs:worker"
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "worker-1", "namespace": "jobs",
                     "labels": {"app": "worker"},
                     "annotations": {"other": "x"}},
        "spec": {"containers": [{"name": "worker", "image": "worker:1"}]},
    }
    busy = copy.deepcopy(pod)
    busy["metadata"]["annotations"].update({
        "controller.kubernetes.io/pod-deletion-cost": "1000",
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
        "karpenter.sh/do-not-disrupt": "true"})
    bare = copy.deepcopy(pod)
    del bare["metadata"]["annotations"]
    bare_busy = copy.deepcopy(bare)
    bare_busy["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    other_changed = copy.deepcopy(busy)
    other_changed["metadata"]["annotations"]["other"] = "y"
    other_removed = copy.deepcopy(busy)
    del other_removed["metadata"]["annotations"]["other"]
    other_added = copy.deepcopy(busy)
    other_added["metadata"]["annotations"]["new"] = "z"
    relabelled = copy.deepcopy(busy)
    relabelled["metadata"]["labels"]["app"] = "other"
    new_image = copy.deepcopy(busy)
    new_image["spec"]["containers"][0]["image"] = "evil:1"
    # A template that sets a key: busy records its value, idle restores it.
    templated = copy.deepcopy(pod)
    templated["metadata"]["annotations"][
        "cluster-autoscaler.kubernetes.io/safe-to-evict"] = "true"
    recorded = copy.deepcopy(busy)
    recorded["metadata"]["annotations"]["drainit.dev/template-annotations"] = (
        '{"cluster-autoscaler.kubernetes.io/safe-to-evict":"true"}')
    other_drainit = copy.deepcopy(busy)
    other_drainit["metadata"]["annotations"]["drainit.dev/other"] = "x"
    return {
        "busy with drainit's record": admitted(templated, recorded, sa, "worker-1"),
        "idle restores the template": admitted(recorded, templated, sa, "worker-1"),
        "another drainit.dev annotation": admitted(busy, other_drainit, sa, "worker-1"),
        "busy on its own pod": admitted(pod, busy, sa, "worker-1"),
        "idle on its own pod": admitted(busy, pod, sa, "worker-1"),
        "busy on a pod without annotations": admitted(bare, bare_busy, sa, "worker-1"),
        "idle back to no annotations": admitted(bare_busy, bare, sa, "worker-1"),
        "another pod": admitted(pod, busy, sa, "worker-2"),
        "a token bound to no pod": admitted(pod, busy, sa, None),
        "another annotation changed": admitted(busy, other_changed, sa, "worker-1"),
        "another annotation removed": admitted(busy, other_removed, sa, "worker-1"),
        "another annotation added": admitted(busy, other_added, sa, "worker-1"),
        "a label changed": admitted(busy, relabelled, sa, "worker-1"),
        "the image changed": admitted(busy, new_image, sa, "worker-1"),
        "another user changes the image": admitted(
            busy, new_image, "system:serviceaccount:kube-system:deployer", None),
    }


def run_value(env, expression, activation):
    value = env.program(env.compile(expression)).evaluate(activation)
    return to_json(value)


def to_json(value):
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    return value


def main():
    found = documents()
    validated, failures = [], []
    for where, doc in found:
        name = f"{where}: {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        problem = validate(doc)
        if problem:
            failures.append(f"{name}: {problem}")
        else:
            validated.append(name)
    deployment = next(d for _, d in found if d.get("kind") == "Deployment")
    broken = copy.deepcopy(deployment)
    broken["spec"]["template"]["spec"]["terminationGracePeriodSecond"] = 30
    example = [d for w, d in found if w == "examples/kubernetes/protect.yaml"]
    shown = [d for w, d in found if w == "docs/kubernetes.md"]
    policy = next(d for d in example if d["kind"] == "ValidatingAdmissionPolicy")
    json.dump({
        "validated": validated,
        "failures": failures,
        "broken_refused": validate(broken) is not None,
        "docs_match_example": shown == example,
        "policy": policy_cases(policy),
    }, sys.stdout)


if __name__ == "__main__":
    main()
