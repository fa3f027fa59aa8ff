"""python -m bench.admission: what one ValidatingAdmissionPolicy, and what one validating webhook,
add to a create, on coreio and on kube-apiserver, side by side in one run.

Each server gets the same policy (RoleBindings may not bind cluster-admin, plus a check over the
subjects) bound to the namespace `guarded` only, and the same validating webhook (the tests'
recording HTTPS webhook, in a thread of this process, allowing with a warning and an audit
annotation) for the namespace `hooked` only; wrk creates RoleBindings for the same time in `plain`,
`guarded` and `hooked`, and the differences are what the policy and the webhook cost a request.
coreio runs standalone on SQLite with both from `--admission-config-file`; kube-apiserver (the e2e
build, on its own etcd) has them applied through its API.

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
from tests.support.admission_webhook import AdmissionWebhookServer
from tests.support.etcd import EtcdProcess

NAMESPACES = ("plain", "guarded", "hooked")
# Each namespace loaded twice, mirrored, so that a drift over the run (a growing store) weighs on all.
ORDER = (*NAMESPACES, *reversed(NAMESPACES))
COREIO_GROUP = "rbac.authorization.core.io"
KUBE_GROUP = "rbac.authorization.k8s.io"


def webhook_configuration(group: str, hook: AdmissionWebhookServer) -> dict[str, Any]:
    rules = [
        {"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["rolebindings"]}
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "bench-webhook"},
        "webhooks": [
            {
                "name": "bench.coreio.test",
                "clientConfig": hook.client_config("allow"),
                "rules": rules,
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "hooked"}},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail",
            }
        ],
    }


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


def prepare_kube(target: Target, hook: AdmissionWebhookServer) -> None:
    """The namespaces, the policy and the webhook in kube-apiserver; waits until the policy
    refuses and the webhook is called."""
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
    call(target, "POST", f"{base}/validatingwebhookconfigurations", webhook_configuration(KUBE_GROUP, hook))
    probe = json.loads(body_template(KUBE_GROUP).replace("__NAME__", "probe"))
    probe["roleRef"]["name"] = "cluster-admin"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            call(target, "POST", f"/apis/{KUBE_GROUP}/v1/namespaces/guarded/rolebindings?dryRun=All", probe)
        except urllib.error.HTTPError:
            call(target, "POST", f"/apis/{KUBE_GROUP}/v1/namespaces/hooked/rolebindings?dryRun=All", probe)
            if hook.reviews("allow"):
                return
        time.sleep(0.2)
    raise RuntimeError("kube-apiserver did not apply the policy and the webhook within 60 s")


def measure(
    target: Target, group: str, scratch: Path, seconds: float, connections: int
) -> dict[str, wrk.WrkResult]:
    """Each namespace loaded twice (ORDER); their figures averaged."""
    template = scratch / f"{target.name}-rolebinding.json"
    template.write_text(body_template(group))
    runs: dict[str, list[wrk.WrkResult]] = {namespace: [] for namespace in NAMESPACES}
    for index, namespace in enumerate(ORDER):
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


def report(name: str, results: dict[str, wrk.WrkResult]) -> list[str]:
    """A row per namespace: throughput and median, and what its admission adds to the median and
    to the server's time per request at saturation (1/throughput)."""
    plain = results["plain"]
    rows = []
    for namespace, what in (("plain", "none"), ("guarded", "one policy"), ("hooked", "one webhook")):
        got = results[namespace]
        added = "" if namespace == "plain" else f"{(got.p50 - plain.p50) * 1e6:,.0f}"
        per_request = "" if namespace == "plain" else f"{(1 / got.rate - 1 / plain.rate) * 1e6:,.0f}"
        rows.append(
            f"| {name} | {what} | {got.rate:,.0f} | {got.p50 * 1e3:.2f} | {got.p99 * 1e3:.2f} | "
            f"{added} | {per_request} | {got.errors} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=8)
    options = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="coreio-bench-admission-") as directory,
        AdmissionWebhookServer() as hook,
    ):
        rows = run(Path(directory), hook, options.seconds, options.connections)
    print(f"RoleBinding creates, {options.connections} connections, {options.seconds:.0f} s a namespace")
    print("| server | admission | req/s | p50 ms | p99 ms | p50 added µs | time/request added µs | errors |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)


def run(scratch: Path, hook: AdmissionWebhookServer, seconds: float, connections: int) -> list[str]:
    token_file, token = write_token_file(scratch)
    manifest = scratch / "admission.yaml"
    objects = [*policy_objects(COREIO_GROUP), webhook_configuration(COREIO_GROUP, hook)]
    manifest.write_text(yaml.safe_dump_all(objects))
    etcd = EtcdProcess()
    etcd.start()
    targets: list[Target] = []
    try:
        targets.append(start_kube_apiserver(scratch, etcd, token_file, token))
        coreio_args = ["--admission-config-file", str(manifest)]
        targets.append(start_coreio("coreio-sqlite", scratch, token_file, token, coreio_args))
        kube, coreio = targets
        prepare_kube(kube, hook)
        return [
            *report("kube-apiserver", measure(kube, KUBE_GROUP, scratch, seconds, connections)),
            *report("coreio (SQLite)", measure(coreio, COREIO_GROUP, scratch, seconds, connections)),
        ]
    finally:
        for target in targets:
            target.stop()
        etcd.stop()


if __name__ == "__main__":
    main()
