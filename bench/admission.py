"""python -m bench.admission: what one ValidatingAdmissionPolicy adds to a create, on coreio and on
kube-apiserver, side by side in one run.

Each server gets the same policy (RoleBindings may not bind cluster-admin, plus a check over the
subjects) bound to the namespace `guarded` only; wrk creates RoleBindings for the same time in
`plain` and in `guarded`, one after the other, and the difference is what the policy costs a
request. coreio runs standalone on SQLite with the policy from `--admission-config-file`;
kube-apiserver (the e2e build, on its own etcd) has it applied through its API.

    .venv/bin/python -m bench.admission [--seconds 10] [--connections 8]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from bench import wrk
from bench.processes import Target, insecure_context, start_coreio, start_kube_apiserver, write_token_file
from tests.support.etcd import EtcdProcess

NAMESPACES = ("plain", "guarded")
COREIO_GROUP = "rbac.authorization.core.io"
KUBE_GROUP = "rbac.authorization.k8s.io"


def policy_objects(group: str) -> list[dict[str, Any]]:
    rules = [
        {"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["rolebindings"]}
    ]
    validations = [
        {"expression": "object.roleRef.name != 'cluster-admin'", "message": "no bindings to cluster-admin"},
        {"expression": "object.subjects.all(s, s.kind != 'Group' || s.name != 'system:anonymous')"},
    ]
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "bench-policy"},
            "spec": {"matchConstraints": {"resourceRules": rules}, "validations": validations},
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "bench-policy-binding"},
            "spec": {
                "policyName": "bench-policy",
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "guarded"}}
                },
            },
        },
    ]


def body_template(group: str) -> str:
    return json.dumps(
        {
            "apiVersion": f"{group}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "__NAME__"},
            "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": group, "kind": "User", "name": "alice"}],
        }
    )


def call(target: Target, method: str, path: str, body: Any) -> None:
    request = urllib.request.Request(
        target.url + path,
        data=json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {target.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=insecure_context(), timeout=30):
        pass


def prepare_kube(target: Target) -> None:
    """The namespaces and the policy in kube-apiserver; waits until the policy refuses."""
    for namespace in NAMESPACES:
        call(
            target,
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        )
    policy, binding = policy_objects(KUBE_GROUP)
    base = "/apis/admissionregistration.k8s.io/v1"
    call(target, "POST", f"{base}/validatingadmissionpolicies", policy)
    call(target, "POST", f"{base}/validatingadmissionpolicybindings", binding)
    probe = json.loads(body_template(KUBE_GROUP).replace("__NAME__", "probe"))
    probe["roleRef"]["name"] = "cluster-admin"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            call(target, "POST", f"/apis/{KUBE_GROUP}/v1/namespaces/guarded/rolebindings?dryRun=All", probe)
        except urllib.error.HTTPError:
            return
        time.sleep(0.2)
    raise RuntimeError("kube-apiserver did not enforce the policy within 60 s")


def measure(
    target: Target, group: str, scratch: Path, seconds: float, connections: int
) -> dict[str, wrk.WrkResult]:
    """Each namespace loaded twice, in the order plain, guarded, guarded, plain (so that a drift
    over the run, such as a growing store, weighs on both alike); their figures averaged."""
    template = scratch / f"{target.name}-rolebinding.json"
    template.write_text(body_template(group))
    runs: dict[str, list[wrk.WrkResult]] = {namespace: [] for namespace in NAMESPACES}
    for index, namespace in enumerate(("plain", "guarded", "guarded", "plain")):
        path = f"/apis/{group}/v1/namespaces/{namespace}/rolebindings"
        args = [path, target.token, f"{namespace}-{index}-{int(time.time())}", str(template)]
        runs[namespace].append(wrk.run(target.url, connections, seconds / 2, "create.lua", args))
    return {namespace: _mean(results) for namespace, results in runs.items()}


def _mean(results: list[wrk.WrkResult]) -> wrk.WrkResult:
    count = len(results)
    return wrk.WrkResult(
        rate=sum(r.rate for r in results) / count,
        p50=sum(r.p50 for r in results) / count,
        p99=sum(r.p99 for r in results) / count,
        requests=sum(r.requests for r in results),
        errors=sum(r.errors for r in results),
    )


def report(name: str, results: dict[str, wrk.WrkResult]) -> str:
    """One row: each namespace's throughput and median, and what the policy adds: to the median,
    and to the server's time per request at saturation (1/throughput)."""
    plain, guarded = results["plain"], results["guarded"]
    per_request_us = (1 / guarded.rate - 1 / plain.rate) * 1e6
    errors = plain.errors + guarded.errors
    return (
        f"| {name} | {plain.rate:,.0f} | {plain.p50 * 1e3:.2f} | {guarded.rate:,.0f} | "
        f"{guarded.p50 * 1e3:.2f} | {(guarded.p50 - plain.p50) * 1e6:,.0f} | "
        f"{per_request_us:,.0f} | {errors} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=8)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coreio-bench-admission-") as directory:
        scratch = Path(directory)
        token_file, token = write_token_file(scratch)
        manifest = scratch / "admission.yaml"
        manifest.write_text(yaml.safe_dump_all(policy_objects(COREIO_GROUP)))
        etcd = EtcdProcess()
        etcd.start()
        targets: list[Target] = []
        try:
            targets.append(start_kube_apiserver(scratch, etcd, token_file, token))
            targets.append(
                start_coreio(
                    "coreio-sqlite", scratch, token_file, token, ["--admission-config-file", str(manifest)]
                )
            )
            kube, coreio = targets
            prepare_kube(kube)
            rows = [
                report(
                    "kube-apiserver", measure(kube, KUBE_GROUP, scratch, options.seconds, options.connections)
                ),
                report(
                    "coreio (SQLite)",
                    measure(coreio, COREIO_GROUP, scratch, options.seconds, options.connections),
                ),
            ]
        finally:
            for target in targets:
                target.stop()
            etcd.stop()
    print(f"RoleBinding creates, {options.connections} connections, {options.seconds:.0f} s each")
    print(
        "| server | no policy req/s | p50 ms | one policy req/s | p50 ms | p50 added µs "
        "| time/request added µs | errors |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
