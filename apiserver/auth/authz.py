"""Authorizers: who may do what. Without one configured every authenticated user may do anything
(the standalone server's single-tenant default); in a cluster the SubjectAccessReview authorizer of
`apiserver.auth.delegated` asks the cluster.

The Forbidden Status says who could not do what exactly as k8s.io/apiserver words it (kubectl and
clients show it verbatim).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery import errors
from apiserver.machinery.user import MASTERS_GROUP, UserInfo


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


ALLOW = Decision(True)


class Authorizer(Protocol):
    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision: ...


# The authorizer that ruled on the request, for a handler that must ask it again (the unsafe delete
# of a corrupt object needs a verb of its own).
AUTHORIZER_KEY: web.RequestKey[Authorizer] = web.RequestKey("authorizer")


class AlwaysAllow:
    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        return ALLOW


class PrivilegedGroups:
    """Members of the given groups (system:masters) may do anything, without asking further; as
    upstream's delegating authorizer, so the aggregator's own probes never wait on the cluster."""

    def __init__(self, delegate: Authorizer, groups: tuple[str, ...] = (MASTERS_GROUP,)) -> None:
        self._delegate = delegate
        self._groups = frozenset(groups)

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        if self._groups.intersection(user.groups):
            return ALLOW
        return await self._delegate.authorize(user, info)


def forbidden_message(user: UserInfo, info: RequestInfo) -> str:
    if not info.is_resource_request:
        return f"User {errors.go_quote(user.name)} cannot {info.verb} path {errors.go_quote(info.path)}"
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    who = f"User {errors.go_quote(user.name)} cannot {info.verb} resource {errors.go_quote(resource)}"
    where = f"in API group {errors.go_quote(info.api_group)}"
    if info.namespace:
        return f"{who} {where} in the namespace {errors.go_quote(info.namespace)}"
    return f"{who} {where} at the cluster scope"


def forbidden(user: UserInfo, info: RequestInfo, reason: str = "") -> errors.StatusError:
    why = forbidden_message(user, info)
    if reason:
        why = f"{why}: {reason}"
    if not info.is_resource_request or not info.resource:
        return errors.StatusError(403, "Forbidden", f"forbidden: {why}", {})
    gr = errors.GroupResource(info.api_group, info.resource)
    return errors.forbidden_error(gr, info.name, why)
