"""Request attributes for authorizers, as upstream's authorizer.Attributes: who (a `UserInfo`) and what
(a `RequestInfo`: verb, API group/version, resource, subresource, namespace, name, or a non-resource
path). Authorizers (`apiserver.auth.authz.Authorizer`) take the two side by side.

Reading an HTTP request is `apiserver.auth.requestinfo.request_info` (upstream's RequestInfoFactory);
this module adds the other ways attributes arise: a request object, an authorization check made by
the server itself (the escalation check's `bind`), a SubjectAccessReview, and a log-friendly text.
"""

from __future__ import annotations

from aiohttp import web

from apiserver.auth.requestinfo import RequestInfo, request_info
from apiserver.machinery.errors import go_quote
from apiserver.machinery.user import UserInfo

# Who the request is, as authentication found it, or the user it impersonates.
USER_KEY = web.RequestKey("user", UserInfo)
# The user the request impersonates (set only then; USER_KEY holds it too).
IMPERSONATED_KEY = web.RequestKey("impersonated_user", UserInfo)


# What the request asks for, parsed once and kept for the in-flight limit, authorization and audit.
INFO_KEY = web.RequestKey("request_info", RequestInfo)


def attributes_from_request(request: web.Request) -> RequestInfo:
    """What an aiohttp request asks for (the user is `request[USER_KEY]`, set by authentication),
    parsed on first use and kept on the request."""
    info = request.get(INFO_KEY)
    if info is None:
        info = request[INFO_KEY] = request_info(request.method, request.path, request.query)
    return info


def request_user(request: web.Request) -> UserInfo | None:
    return request.get(USER_KEY)


def resource_attributes(
    verb: str,
    *,
    api_group: str,
    resource: str,
    namespace: str = "",
    name: str = "",
    subresource: str = "",
    api_version: str = "",
) -> RequestInfo:
    """A resource request built by hand (upstream's AttributesRecord with ResourceRequest true)."""
    return RequestInfo(
        verb=verb,
        path="",
        is_resource_request=True,
        api_group=api_group,
        api_version=api_version,
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
    )


def non_resource_attributes(verb: str, path: str) -> RequestInfo:
    return RequestInfo(verb=verb, path=path)


def describe(user: UserInfo, info: RequestInfo) -> str:
    """One line for logs, as upstream's RBAC denial log words it:
    `user "alice" with groups [...] to "get" resource "pods/log" named "x" in namespace "ns"`."""
    if info.is_resource_request:
        resource = info.resource + (f".{info.api_group}" if info.api_group else "")
        if info.subresource:
            resource += f"/{info.subresource}"
        operation = f"{go_quote(info.verb)} resource {go_quote(resource)}"
        if info.name:
            operation += f" named {go_quote(info.name)}"
    else:
        operation = f"{go_quote(info.verb)} nonResourceURL {go_quote(info.path)}"
    scope = f"in namespace {go_quote(info.namespace)}" if info.namespace else "cluster-wide"
    groups = "[" + " ".join(go_quote(g) for g in user.groups) + "]"
    return f"user {go_quote(user.name)} with groups {groups} to {operation} {scope}"
