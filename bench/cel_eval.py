"""CEL: compile time and evaluation time of typical policy expressions over a RoleBinding.

Run from the repository root: `.venv/bin/python -m bench.cel_eval`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from apiserver.cel import compile_expression

VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject", "variables")
EXPRESSIONS = (
    "object.roleRef.name != 'cluster-admin'",
    "object.subjects.all(s, s.kind != 'Group' || !s.name.startsWith('system:'))",
    "request.userInfo.username == 'admin' || 'devs' in request.userInfo.groups",
    "oldObject == null || object.roleRef == oldObject.roleRef",
    "has(object.metadata.labels) && object.metadata.labels.exists(k, k.startsWith('team.'))",
    "object.subjects.map(s, s.name).filter(n, n.matches('^user-[0-9]+$')).size() <= 10",
    "quantity(object.metadata.annotations['quota']).isLessThan(quantity('2Gi'))",
    "'%s may bind %s'.format([request.userInfo.username, object.roleRef.name])",
)


def _binding(subjects: int) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.core.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": "readers",
            "namespace": "team",
            "labels": {"team.example.com/owner": "alice"},
            "annotations": {"quota": "1536Mi"},
        },
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [
            {"kind": "User", "apiGroup": "rbac.authorization.core.io", "name": f"user-{n}"}
            for n in range(subjects)
        ],
    }


def _activation(subjects: int) -> dict[str, Any]:
    binding = _binding(subjects)
    user = {"username": "alice", "groups": ["system:authenticated", "devs"]}
    request = {"operation": "UPDATE", "name": "readers", "namespace": "team", "userInfo": user}
    namespace = {"metadata": {"name": "team"}}
    return {"object": binding, "oldObject": binding, "request": request, "params": None,
            "namespaceObject": namespace, "variables": {}}  # fmt: skip


def _per_call(action: Callable[[], object], least: float = 0.2) -> float:
    """Seconds one call takes, from as many calls as fill `least` seconds."""
    calls, began = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - began) < least:
        action()
        calls += 1
    return elapsed / calls


def main() -> None:
    for subjects in (5, 1000):
        activation = _activation(subjects)
        print(f"RoleBinding with {subjects} subjects")
        print(f"  {'compile us':>10} {'eval us':>9}  expression")
        for source in EXPRESSIONS:
            compiled = _per_call(functools.partial(compile_expression, source, VARIABLES))
            program = compile_expression(source, VARIABLES)
            evaluated = _per_call(functools.partial(program.evaluate, activation))
            print(f"  {compiled * 1e6:10.1f} {evaluated * 1e6:9.1f}  {source}")


if __name__ == "__main__":
    main()
