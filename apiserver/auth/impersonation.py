"""Impersonation, as kube-apiserver's filter: the `Impersonate-User`, `-Group`, `-Uid` and
`-Extra-<key>` headers ask to act as another user; each thing asked for is authorized for the
requestor with the verb `impersonate` (users, groups and service accounts in the core group; uids and
userextras in authentication.k8s.io), and the request then goes on as the user asked for.

Behind kube-apiserver's aggregator the cluster has done this already: it strips the headers and
forwards the impersonated user in its front-proxy headers, so nothing is applied twice.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from apiserver.auth.attributes import resource_attributes
from apiserver.auth.authz import Authorizer, forbidden
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery import formats
from apiserver.machinery.user import AUTHENTICATED_GROUP, UserInfo

USER_HEADER = "Impersonate-User"
GROUP_HEADER = "Impersonate-Group"
UID_HEADER = "Impersonate-Uid"
EXTRA_PREFIX = "impersonate-extra-"
AUTHENTICATION_GROUP = "authentication.k8s.io"
ANONYMOUS = "system:anonymous"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
# A percent sign not starting an escape: Go's url.PathUnescape refuses the whole key then.
_BAD_ESCAPE = re.compile(r"%(?![0-9a-fA-F]{2})")


@dataclass(frozen=True)
class Requested:
    """One thing impersonation asks for, as upstream's ObjectReference of it."""

    kind: str  # User, ServiceAccount, Group, UserExtra or UID
    name: str
    namespace: str = ""
    api_version: str = ""
    field_path: str = ""  # a UserExtra's key

    def go_value(self) -> str:
        """Go's %v of the ObjectReference: Kind Namespace Name UID APIVersion ResourceVersion
        FieldPath, in braces."""
        fields = (self.kind, self.namespace, self.name, "", self.api_version, "", self.field_path)
        return "{" + " ".join(fields) + "}"

    def attributes(self) -> RequestInfo:
        """What the requestor must be allowed to `impersonate`."""
        if self.kind == "ServiceAccount":
            return resource_attributes(
                "impersonate",
                api_group="",
                resource="serviceaccounts",
                namespace=self.namespace,
                name=self.name,
            )
        if self.kind in ("User", "Group"):
            return resource_attributes(
                "impersonate", api_group="", resource=f"{self.kind.lower()}s", name=self.name
            )
        return resource_attributes(
            "impersonate",
            api_group=AUTHENTICATION_GROUP,
            api_version="v1",
            resource="userextras" if self.kind == "UserExtra" else "uids",
            subresource=self.field_path,
            name=self.name,
        )


class WithoutUserError(Exception):
    """Groups, extras or a uid asked for without a user: upstream answers 500 in plain text."""

    def __init__(self, requested: list[Requested]) -> None:
        self.requested = requested
        super().__init__("requested " + _go_list(requested) + " without impersonating a user")

    def body(self, request_uri: str) -> str:
        """Upstream's InternalError text: the message, HTML-escaped as its writer escapes it."""
        text = f'Internal Server Error: "{request_uri}": {self}'
        return html.escape(text, quote=False) + "\n"


def _go_list(requested: Iterable[Requested]) -> str:
    return "[" + " ".join(item.go_value() for item in requested) + "]"


def extra_key(header_rest: str) -> str:
    """An extra's key from the header name after the prefix: lowercased, then percent-decoded
    (kept as is when it is not a valid escape sequence, as Go's url.PathUnescape refuses it)."""
    key = header_rest.lower()
    return key if _BAD_ESCAPE.search(key) else unquote(key)


def _service_account(name: str) -> tuple[str, str] | None:
    """(namespace, name) of a service account's username, as upstream's SplitUsername takes it."""
    if not name.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    parts = name.removeprefix(SERVICE_ACCOUNT_PREFIX).split(":")
    if len(parts) != 2 or formats.is_dns1123_label(parts[0]) or formats.is_dns1123_subdomain(parts[1]):
        return None
    return parts[0], parts[1]


def requested(headers: Iterable[tuple[str, str]]) -> list[Requested]:
    """What the headers ask for, in upstream's order: the user, each group, each extra value, the
    uid. Empty: no impersonation. WithoutUserError when there is no user for the rest."""
    pairs = list(headers)
    user = next((value for name, value in pairs if name.lower() == USER_HEADER.lower()), "")
    uid = next((value for name, value in pairs if name.lower() == UID_HEADER.lower()), "")
    found: list[Requested] = [
        Requested("Group", value) for name, value in pairs if name.lower() == GROUP_HEADER.lower()
    ]
    found += [
        Requested(
            "UserExtra",
            value,
            api_version=f"{AUTHENTICATION_GROUP}/v1",
            field_path=extra_key(name[len(EXTRA_PREFIX) :]),
        )
        for name, value in pairs
        if name.lower().startswith(EXTRA_PREFIX)
    ]
    if uid:
        found.append(Requested("UID", uid, api_version=f"{AUTHENTICATION_GROUP}/v1"))
    if not user:
        if found:
            raise WithoutUserError(found)
        return []
    account = _service_account(user)
    first = (
        Requested("User", user) if account is None else Requested("ServiceAccount", account[1], account[0])
    )
    return [first, *found]


def impersonated_user(asked: list[Requested]) -> UserInfo:
    """The user `asked` (from `requested`, not empty) makes, with upstream's implied groups."""
    first = asked[0]
    name = first.name if first.kind == "User" else f"{SERVICE_ACCOUNT_PREFIX}{first.namespace}:{first.name}"
    groups = [item.name for item in asked if item.kind == "Group"]
    if first.kind == "ServiceAccount" and not groups:
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{first.namespace}"]
    if name == ANONYMOUS:
        if UNAUTHENTICATED_GROUP not in groups:
            groups.append(UNAUTHENTICATED_GROUP)
    elif AUTHENTICATED_GROUP not in groups and UNAUTHENTICATED_GROUP not in groups:
        groups.append(AUTHENTICATED_GROUP)
    extra: dict[str, tuple[str, ...]] = {}
    for item in asked:
        if item.kind == "UserExtra":
            extra[item.field_path] = (*extra.get(item.field_path, ()), item.name)
    uid = next((item.name for item in asked if item.kind == "UID"), "")
    return UserInfo(name, uid, tuple(groups), extra)


async def impersonate(authorizer: Authorizer, requestor: UserInfo, asked: list[Requested]) -> UserInfo:
    """The user `requestor` acts as, once `authorizer` allowed each thing asked for; the first
    refused is upstream's 403 (a StatusError)."""
    for item in asked:
        info = item.attributes()
        decision = await authorizer.authorize(requestor, info)
        if not decision.allowed:
            raise forbidden(requestor, info, decision.reason)
    return impersonated_user(asked)


def acting_as(name: str, groups: Iterable[str] = (), uid: str = "") -> UserInfo:
    """Who `kubectl --as NAME --as-group G... --as-uid UID` acts as: the user with upstream's
    implied groups (a service account's, system:authenticated)."""
    headers = [(USER_HEADER, name), *((GROUP_HEADER, group) for group in groups)]
    if uid:
        headers.append((UID_HEADER, uid))
    return impersonated_user(requested(headers))
