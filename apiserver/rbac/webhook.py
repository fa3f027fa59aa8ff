"""The authorization webhook: kube-apiserver asks coreio, with a SubjectAccessReview, whether its
RoleBindings allow a request, so that a cluster run with `--authorization-mode=...,Webhook` and
`--authorization-webhook-config-file` enforces RoleBindings stored here (docs/authorization-webhook.md).

Wire format (k8s.io/apiserver plugin/pkg/authorizer/webhook): kube-apiserver POSTs a
SubjectAccessReview (authorization.k8s.io/v1, or v1beta1 with `--authorization-webhook-version
v1beta1`, its default) whose spec carries user, uid, groups (`group` in v1beta1), extra, and either
resourceAttributes (namespace, verb, group, version, resource, subresource, name) or
nonResourceAttributes (path, verb). The answer is the same kind and version with `status.allowed`
and, when there is one, `status.reason`. coreio's RBAC never denies outright: a request its
RoleBindings do not allow is "no opinion" (allowed false, denied unset), so kube-apiserver goes on
to its next authorizer.

The answer comes from the RBAC authorizer alone, never from the delegated SubjectAccessReview, so
kube-apiserver asking coreio can never make coreio ask kube-apiserver. For the same reason callers
of the endpoint are authorized locally: system:masters, or users and groups named at start
(`WebhookCallers`, which the authorizer chain places first for this path).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from aiohttp import web

from apiserver.auth.attributes import (
    attributes_from_request,
    non_resource_attributes,
    request_user,
    resource_attributes,
)
from apiserver.auth.authz import ALLOW, Decision, forbidden
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery import errors
from apiserver.machinery.types import JSON
from apiserver.machinery.user import MASTERS_GROUP, UserInfo
from apiserver.rbac.authorizer import RBACAuthorizer

WEBHOOK_PATH = "/authorize"
API_GROUP = "authorization.k8s.io"
SUPPORTED_VERSIONS = (f"{API_GROUP}/v1", f"{API_GROUP}/v1beta1")
KIND = "SubjectAccessReview"
NOT_ALLOWED = Decision(False)


def _str(obj: Any, key: str) -> str:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def parse_review(body: Any) -> tuple[str, UserInfo, RequestInfo]:
    """The apiVersion, user and attributes of a SubjectAccessReview; 400 when it is none."""
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a SubjectAccessReview object")
    api_version = body.get("apiVersion")
    if api_version not in SUPPORTED_VERSIONS or body.get("kind") != KIND:
        raise errors.bad_request(
            f"expected kind {KIND} in {' or '.join(SUPPORTED_VERSIONS)}, "
            f"got {body.get('kind')!r} in {api_version!r}"
        )
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise errors.bad_request("spec is required")
    groups_key = "groups" if api_version.endswith("/v1") else "group"
    extra_raw = spec.get("extra")
    extra = {str(k): _strings(v) for k, v in extra_raw.items()} if isinstance(extra_raw, dict) else {}
    user = UserInfo(
        name=_str(spec, "user"), uid=_str(spec, "uid"), groups=_strings(spec.get(groups_key)), extra=extra
    )
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if isinstance(resource, dict) == isinstance(non_resource, dict):
        raise errors.bad_request(
            "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        )
    if isinstance(resource, dict):
        info = resource_attributes(
            _str(resource, "verb"),
            api_group=_str(resource, "group"),
            api_version=_str(resource, "version"),
            resource=_str(resource, "resource"),
            subresource=_str(resource, "subresource"),
            namespace=_str(resource, "namespace"),
            name=_str(resource, "name"),
        )
    else:
        info = non_resource_attributes(_str(non_resource, "verb"), _str(non_resource, "path"))
    if not user.name and not user.groups:
        raise errors.bad_request("at least one of user or group must be specified")
    return str(api_version), user, info


def review_response(body: JSON, decision: Decision) -> JSON:
    """The review answered: the request's apiVersion, kind, metadata and spec, with its status."""
    status: JSON = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return {
        "apiVersion": body["apiVersion"],
        "kind": KIND,
        "metadata": body.get("metadata") if isinstance(body.get("metadata"), dict) else {},
        "spec": body["spec"],
        "status": status,
    }


class WebhookCallers:
    """Who may call the webhook endpoint: system:masters and the named users and groups.

    An `Authorizer` for the chain: allows POSTs to `path` from those callers, and has no opinion
    about anything else (so it can sit first in the chain without granting more)."""

    def __init__(
        self,
        users: Iterable[str] = (),
        groups: Iterable[str] = (),
        *,
        path: str = WEBHOOK_PATH,
        privileged_groups: Iterable[str] = (MASTERS_GROUP,),
    ) -> None:
        self.users = frozenset(users)
        self.groups = frozenset(groups) | frozenset(privileged_groups)
        self.path = path

    def allows(self, user: UserInfo) -> bool:
        return user.name in self.users or bool(self.groups.intersection(user.groups))

    def is_webhook_request(self, info: RequestInfo) -> bool:
        return not info.is_resource_request and info.path == self.path

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        if self.is_webhook_request(info) and info.verb == "post" and self.allows(user):
            return ALLOW
        return NOT_ALLOWED


class SubjectAccessReviewWebhook:
    """The endpoint (`handle`, for `POST /authorize`)."""

    def __init__(self, rbac: RBACAuthorizer, callers: WebhookCallers) -> None:
        self.rbac = rbac
        self.callers = callers

    async def handle(self, request: web.Request) -> web.StreamResponse:
        user = request_user(request)
        if user is None:
            raise errors.unauthorized()
        if not self.callers.allows(user):
            # Normally refused already by the chain; checked here too so the endpoint is safe
            # whatever the middleware.
            raise forbidden(user, attributes_from_request(request))
        try:
            body = json.loads(await request.read())
        except ValueError as exc:
            raise errors.bad_request(f"the request body is no JSON: {exc}") from exc
        except RecursionError:
            raise errors.bad_request("the request body is no JSON: nested too deeply") from None
        _, subject, info = parse_review(body)
        decision = self.rbac.evaluate(subject, info)
        return web.json_response(review_response(body, decision), dumps=_compact)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
