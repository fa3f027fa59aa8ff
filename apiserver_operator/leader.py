"""The operator's Lease: its replicas elect through it (apiserver.cluster.leader), so that only one
reconciles at a time."""

from __future__ import annotations

from typing import Any

from apiserver.cluster.leader import LeaderElection
from apiserver_operator.kube import ApiError, KubeClient

LEASE_NAME = "coreio-operator"


def election(client: KubeClient, namespace: str, identity: str, **options: Any) -> LeaderElection:
    """The election on the operator's Lease in `namespace`, as `identity` (`options`: timings)."""
    return LeaderElection(client, namespace, LEASE_NAME, identity, errors=(ApiError,), **options)
