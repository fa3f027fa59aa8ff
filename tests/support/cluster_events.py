"""Events shaped as a cluster's: kubelet's, the scheduler's and a ReplicaSet controller's reasons and
notes, over varied namespaces, apps, pods, nodes, images and addresses, with every name, uid, time
and count drawn apart. Unlike the benchmark's Event (one note repeated), they pack about as a real
cluster's Events would (storage/cacher/packing.py). Deterministic: Event `index` is always the same."""

from __future__ import annotations

import random
import uuid
from typing import Any

APPS = ("web", "api", "worker", "redis", "postgres", "nginx", "kafka", "fluent-bit", "coredns", "payments")
NAMESPACES = ("default", "kube-system", "prod", "staging", "monitoring", "payments", "team-a", "team-b")
CONTROLLERS = {"Scheduled": "default-scheduler", "FailedScheduling": "default-scheduler"}
_LETTERS = "bcdfghjklmnpqrstvwxz2456789"


class _Draw:
    def __init__(self, index: int) -> None:
        self.rnd = random.Random(index)

    def word(self, length: int) -> str:
        return "".join(self.rnd.choice(_LETTERS) for _ in range(length))

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rnd.getrandbits(128)))

    def address(self) -> str:
        return f"10.{self.rnd.randint(0, 255)}.{self.rnd.randint(0, 255)}.{self.rnd.randint(1, 254)}"

    def time(self) -> str:
        day, hour, minute, second = (
            self.rnd.randint(1, 27),
            self.rnd.randint(0, 23),
            *self.rnd.sample(range(60), 2),
        )
        return f"2026-11-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"


def _note(draw: _Draw, namespace: str, pod: str, app: str, node: str) -> tuple[str, str, str]:
    rnd = draw.rnd
    image = f"registry.example.com/{app}:v{rnd.randint(1, 3)}.{rnd.randint(0, 20)}.{rnd.randint(0, 9)}"
    nodes, pulled, waited, size = (
        rnd.randint(3, 50),
        rnd.uniform(0.3, 30),
        rnd.uniform(0.3, 30),
        rnd.randint(10**6, 10**9),
    )
    restarting = f"Back-off restarting failed container {app} in pod {pod}_{namespace}({draw.uid()})"
    notes = (
        ("Normal", "Scheduled", f"Successfully assigned {namespace}/{pod} to {node}"),
        ("Normal", "Pulling", f'Pulling image "{image}"'),
        (
            "Normal",
            "Pulled",
            f'Successfully pulled image "{image}" in {pulled:.3f}s ({waited:.3f}s including waiting). '
            f"Image size: {size} bytes.",
        ),
        ("Normal", "Created", f"Created container: {app}"),
        ("Normal", "Started", f"Started container {app}"),
        (
            "Warning",
            "BackOff",
            restarting,
        ),
        (
            "Warning",
            "Unhealthy",
            f'Readiness probe failed: Get "http://{draw.address()}:8080/healthz": '
            f"dial tcp {draw.address()}:8080: connect: connection refused",
        ),
        (
            "Warning",
            "FailedScheduling",
            f"0/{nodes} nodes are available: {rnd.randint(1, 3)} Insufficient cpu. "
            f"preemption: 0/{nodes} nodes are available: {rnd.randint(1, 3)} No preemption victims found.",
        ),
        ("Normal", "Killing", f"Stopping container {app}"),
    )
    return rnd.choice(notes)


def event_body(index: int, group_version: str = "events.core.io/v1") -> dict[str, Any]:
    """Event `index` as a client creates it."""
    draw = _Draw(index)
    namespace, app = draw.rnd.choice(NAMESPACES), draw.rnd.choice(APPS)
    pod, node = f"{app}-{draw.word(10)}-{draw.word(5)}", f"node-{draw.rnd.randint(1, 40)}"
    kind, reason, note = _note(draw, namespace, pod, app, node)
    controller = CONTROLLERS.get(reason, "kubelet")
    regarding: dict[str, Any] = {"kind": "Pod", "namespace": namespace, "name": pod, "uid": draw.uid()}
    regarding |= {"apiVersion": "v1", "resourceVersion": str(draw.rnd.randint(1000, 10**7))}
    if controller == "kubelet":
        regarding["fieldPath"] = f"spec.containers{{{app}}}"
    return {
        "apiVersion": group_version,
        "kind": "Event",
        "metadata": {"name": f"{pod}.{draw.rnd.getrandbits(64):x}", "namespace": namespace},
        "eventTime": draw.time()[:-1] + f".{draw.rnd.randint(0, 999_999):06d}Z",
        "reportingController": controller,
        "reportingInstance": f"{controller}-{node}",
        "action": reason,
        "reason": reason,
        "regarding": regarding,
        "note": note,
        "type": kind,
    }


def stored_event(index: int) -> dict[str, Any]:
    """Event `index` as the server stores it: with its uid, creation time and managed fields."""
    body, draw = event_body(index), _Draw(-index - 1)
    created = draw.time()
    fields: dict[str, Any] = {
        f"f:{name}": {} for name in ("action", "eventTime", "note", "reason", "regarding", "type")
    }
    body["metadata"] |= {
        "uid": draw.uid(),
        "creationTimestamp": created,
        "managedFields": [
            {
                "manager": body["reportingController"],
                "operation": "Update",
                "apiVersion": body["apiVersion"],
                "time": created,
                "fieldsType": "FieldsV1",
                "fieldsV1": fields,
            }
        ],
    }
    return body
