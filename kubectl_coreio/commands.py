"""The three commands: each sends its review to the namespace (or to all namespaces) and prints the
answer as a table, or whole with -o json|yaml. Warnings go to stderr, as kubectl's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TextIO

from kubectl_coreio import printing
from kubectl_coreio.connection import Connection
from kubectl_coreio.resources import Target

API_VERSION = "rbac.authorization.core.io/v1"
PREFIX = f"/apis/{API_VERSION}"
CLUSTER_NOTE = (
    "in a cluster, subjects the cluster's own bindings allow (ClusterRoleBindings, its RoleBindings)"
    " are not listed: ask the cluster with kubectl auth can-i --as"
)


@dataclass
class Output:
    out: TextIO
    err: TextIO
    format: str = ""  # "", "json" or "yaml"

    def warn(self, message: str) -> None:
        self.err.write(f"Warning: {message}\n")


def _review(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "spec": spec}


def _path(namespace: str, plural: str) -> str:
    return f"{PREFIX}/namespaces/{namespace}/{plural}" if namespace else f"{PREFIX}/{plural}"


def who_can(connection: Connection, output: Output, verb: str, target: Target, namespace: str) -> int:
    spec = target.spec(verb)
    answer = connection.post(_path(namespace, "resourceaccessreviews"), _review("ResourceAccessReview", spec))
    if output.format:
        printing.document(output.out, answer, output.format)
        return 0
    status = answer.get("status") or {}
    rows = [
        [
            printing.subject(entry),
            entry.get("kind", ""),
            printing.reference(entry.get("grantedBy")),
            printing.reference(entry.get("roleRef")),
            printing.rule(entry.get("rule") or {}),
        ]
        for entry in status.get("subjects") or []
    ]
    printing.table(output.out, ["SUBJECT", "KIND", "BINDING", "ROLE", "RULE"], rows)
    if status.get("evaluationError"):
        output.warn(f"bindings that grant nothing: {status['evaluationError']}")
    if status.get("incomplete"):
        output.warn(CLUSTER_NOTE)
    return 0


def why(
    connection: Connection,
    output: Output,
    user: str,
    groups: list[str],
    verb: str,
    target: Target,
    namespace: str,
) -> int:
    spec: dict[str, Any] = {"user": user, **target.spec(verb)}
    if groups:
        spec["groups"] = groups
    answer = connection.post(_path(namespace, "accessexplanations"), _review("AccessExplanation", spec))
    if output.format:
        printing.document(output.out, answer, output.format)
        return 0
    status = answer.get("status") or {}
    verdict = "allowed" if status.get("allowed") else "denied"
    where = "" if target.url else f" in namespace {namespace}"
    output.out.write(f"{verdict}: {user} {verb} {target}{where}\n")
    if status.get("reason"):
        output.out.write(f"reason: {status['reason']}\n")
    output.out.write("\n")
    rows = [
        [
            decision.get("authorizer", ""),
            decision.get("roleBinding", ""),
            printing.reference(decision.get("roleRef")),
            decision.get("decision", ""),
            decision.get("reason", ""),
        ]
        for decision in status.get("decisions") or []
    ]
    printing.table(output.out, ["AUTHORIZER", "ROLEBINDING", "ROLE", "DECISION", "REASON"], rows)
    others = status.get("otherRoleBindings") or 0
    if others:
        output.out.write(
            f"\n{others} other RoleBinding(s) in {namespace} name neither {user} nor its groups\n"
        )
    return 0


def bindings(connection: Connection, output: Output, namespace: str, problems_only: bool) -> int:
    spec = {"problemsOnly": True} if problems_only else {}
    answer = connection.post(_path(namespace, "rolebindingreviews"), _review("RoleBindingReview", spec))
    if output.format:
        printing.document(output.out, answer, output.format)
        return 0
    found = (answer.get("status") or {}).get("roleBindings") or []
    if not found:
        where = f"in {namespace} namespace" if namespace else "in any namespace you may list"
        output.err.write(f"No {'problems' if problems_only else 'RoleBindings'} found {where}.\n")
        return 0
    if problems_only:
        rows = [
            [b.get("namespace", ""), b.get("name", ""), p.get("reason", ""), p.get("message", "")]
            for b in found
            for p in b.get("problems") or []
        ]
        printing.table(output.out, ["NAMESPACE", "NAME", "REASON", "MESSAGE"], rows)
        return 0
    rows = [
        [
            b.get("namespace", ""),
            b.get("name", ""),
            printing.reference(b.get("roleRef")),
            ",".join(
                f"{s.get('kind')}/{printing.subject(s, b.get('namespace', ''))}"
                for s in b.get("subjects") or []
            ),
            ",".join(p.get("reason", "") for p in b.get("problems") or []),
        ]
        for b in found
    ]
    printing.table(output.out, ["NAMESPACE", "NAME", "ROLE", "SUBJECTS", "PROBLEMS"], rows)
    return 0
