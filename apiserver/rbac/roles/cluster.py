"""`ClusterRoleSource` (in a cluster): the cluster's own Roles and ClusterRoles, listed once and
then watched (an informer's list+watch with resourceVersion, relisting on 410), never fetched per
request."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from apiserver.cluster.connection import ClusterConnection
from apiserver.cluster.reflector import ClusterReader, Reflector
from apiserver.machinery.types import JSON
from apiserver.rbac.roles.model import CLUSTER_ROLE_KIND, RBAC_API_VERSION, ROLE_KIND, Role, RoleFormatError

log = logging.getLogger(__name__)


def _role_parser(kind: str, path: str) -> Callable[[JSON], Role | None]:
    """Objects of a list or watch of `path` as Roles; a malformed one is logged and skipped."""

    def parse(obj: JSON) -> Role | None:
        meta = obj.get("metadata") or {}
        try:
            # Items of a list carry no kind; the path says what they are.
            return Role.from_object({"kind": kind, **obj}, f"{path} {meta.get('name', '')}")
        except RoleFormatError as exc:
            log.warning("ignoring %s", exc)
            return None

    return parse


class ClusterRoleSource:
    """The cluster's Roles and ClusterRoles, kept current by list+watch against its kube-apiserver.

    `start()` begins both reflectors; `ready` turns true once both have listed. The connection's
    user needs get/list/watch on roles and clusterroles in rbac.authorization.k8s.io (cluster-wide).
    `on_change` callbacks run (synchronously) after every change, e.g. to re-check RoleBindings.
    """

    ROLES_PATH = f"/apis/{RBAC_API_VERSION}/roles"
    CLUSTER_ROLES_PATH = f"/apis/{RBAC_API_VERSION}/clusterroles"

    def __init__(
        self,
        connection: ClusterConnection,
        *,
        page_size: int = 500,
        watch_timeout: float = 300.0,
        request_timeout: float = 30.0,
        min_backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        self.reader = ClusterReader(connection, request_timeout=request_timeout)
        self.on_change: list[Callable[[], None]] = []

        def reflector(path: str, kind: str) -> Reflector[Role]:
            return Reflector(
                self.reader,
                path,
                _role_parser(kind, path),
                page_size=page_size,
                watch_timeout=watch_timeout,
                min_backoff=min_backoff,
                max_backoff=max_backoff,
            )

        self._roles = reflector(self.ROLES_PATH, ROLE_KIND)
        self._cluster_roles = reflector(self.CLUSTER_ROLES_PATH, CLUSTER_ROLE_KIND)
        for each in (self._roles, self._cluster_roles):
            each.on_change.append(self._changed)

    # -- RoleSource

    @property
    def ready(self) -> bool:
        return self._roles.synced.is_set() and self._cluster_roles.synced.is_set()

    def get_role(self, namespace: str, name: str) -> Role | None:
        return self._roles.items.get((namespace, name))

    def get_cluster_role(self, name: str) -> Role | None:
        return self._cluster_roles.items.get(("", name))

    # -- lifecycle

    def start(self) -> None:
        self._roles.start()
        self._cluster_roles.start()

    async def wait_ready(self) -> None:
        """Returns once both lists are in (bound it with `asyncio.timeout`)."""
        await asyncio.gather(self._roles.synced.wait(), self._cluster_roles.synced.wait())

    async def close(self) -> None:
        await self._roles.stop()
        await self._cluster_roles.stop()
        await self.reader.close()

    def _changed(self) -> None:
        for callback in self.on_change:
            try:
                callback()
            except Exception:
                log.exception("role source change callback failed")
