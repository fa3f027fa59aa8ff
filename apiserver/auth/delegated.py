"""Delegation to the cluster coreio is aggregated into: who a bearer token is (TokenReview), what a
user may do (SubjectAccessReview), and which CAs and headers to trust
(`kube-system/extension-apiserver-authentication`), as k8s.io/apiserver's delegating options do.

The cluster is reached with a kubeconfig (`--authentication-kubeconfig`,
`--authorization-kubeconfig`, or `--kubeconfig` for both); its user needs the cluster roles
`system:auth-delegator` and, in kube-system, `extension-apiserver-authentication-reader`. Answers
are cached briefly (10 s, upstream's default), keyed by a hash of the token or by the whole review.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from aiohttp import web
from cryptography import x509

from apiserver import pki
from apiserver.auth.authn import RequestHeaderAuthenticator, RequestHeaderConfig
from apiserver.auth.authz import Decision
from apiserver.auth.requestinfo import RequestInfo
from apiserver.cluster.connection import ClusterClient, ClusterError
from apiserver.machinery import errors
from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo

log = logging.getLogger(__name__)

CACHE_TTL = 10.0
AUTHENTICATION_CONFIGMAP = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


# --- caching ---------------------------------------------------------------------------------

K = TypeVar("K")
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """Answers kept for `ttl` seconds; at most `size` of them, the oldest dropped first."""

    def __init__(self, ttl: float, size: int = 4096) -> None:
        self.ttl = ttl
        self.size = size
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        if item[0] < time.monotonic():
            del self._items[key]
            return None
        return item[1]

    def put(self, key: K, value: V) -> None:
        if self.ttl <= 0:
            return
        self._items[key] = (time.monotonic() + self.ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


async def _once(pending: dict[str, asyncio.Future[Any]], key: str, call: Callable[[], Awaitable[Any]]) -> Any:
    """Concurrent identical reviews share one call to the cluster."""
    if (future := pending.get(key)) is not None:
        return await asyncio.shield(future)
    future = asyncio.get_running_loop().create_future()
    pending[key] = future
    try:
        result = await call()
    except BaseException as exc:
        future.set_exception(exc)
        future.exception()  # retrieved: a lone caller must not leave "never retrieved" warnings
        raise
    else:
        future.set_result(result)
        return result
    finally:
        del pending[key]


# --- authentication: TokenReview --------------------------------------------------------------


def _user_from_review(user: JSON) -> UserInfo:
    extra = {str(k): tuple(str(v) for v in (vs or ())) for k, vs in (user.get("extra") or {}).items()}
    return UserInfo(
        name=str(user.get("username", "")),
        uid=str(user.get("uid", "")),
        groups=tuple(str(g) for g in user.get("groups") or ()),
        extra=extra,
    )


class TokenReviewAuthenticator:
    """Bearer tokens the cluster vouches for (service-account tokens, its OIDC users, ...)."""

    def __init__(
        self, client: ClusterClient, *, audiences: tuple[str, ...] = (), cache_ttl: float = CACHE_TTL
    ) -> None:
        self._client = client
        self._audiences = audiences
        # (user,) so that a cached "not authenticated" (None) differs from a miss.
        self._cache: TTLCache[str, tuple[UserInfo | None]] = TTLCache(cache_ttl)
        self._pending: dict[str, asyncio.Future[Any]] = {}

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or not token.isascii():
            return None  # no bearer token is other than ASCII; one that is not cannot be reviewed
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._cache.get(key)
        if cached is None:
            cached = await _once(self._pending, key, lambda: self._review(key, token))
        user = cached[0]
        if user is None:
            raise errors.unauthorized()
        return user

    async def _review(self, key: str, token: str) -> tuple[UserInfo | None]:
        spec: JSON = {"token": token}
        if self._audiences:
            spec["audiences"] = list(self._audiences)
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        try:
            status = (await self._client.request("POST", TOKEN_REVIEWS, review)).get("status") or {}
        except ClusterError as exc:
            log.warning("TokenReview failed: %s", exc)
            raise errors.unauthorized() from exc
        user: UserInfo | None = None
        if status.get("authenticated") and isinstance(status.get("user"), dict):
            user = _user_from_review(status["user"])
            if self._audiences and not set(self._audiences).intersection(status.get("audiences") or ()):
                user = None
        self._cache.put(key, (user,))
        return (user,)


# --- authorization: SubjectAccessReview -------------------------------------------------------


def access_review_spec(user: UserInfo, info: RequestInfo) -> JSON:
    spec: JSON = {"user": user.name, "groups": list(user.groups)}
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra.items()}
    if info.is_resource_request:
        attributes = {
            "namespace": info.namespace,
            "verb": info.verb,
            "group": info.api_group,
            "version": info.api_version,
            "resource": info.resource,
            "subresource": info.subresource,
            "name": info.name,
        }
        spec["resourceAttributes"] = {k: v for k, v in attributes.items() if v}
    else:
        spec["nonResourceAttributes"] = {"path": info.path, "verb": info.verb}
    return spec


class SubjectAccessReviewAuthorizer:
    """Asks the cluster's authorizers (its RBAC) whether the user may do what the request asks."""

    def __init__(
        self, client: ClusterClient, *, allow_ttl: float = CACHE_TTL, deny_ttl: float = CACHE_TTL
    ) -> None:
        self._client = client
        self._allowed: TTLCache[str, Decision] = TTLCache(allow_ttl)
        self._denied: TTLCache[str, Decision] = TTLCache(deny_ttl)
        self._pending: dict[str, asyncio.Future[Any]] = {}

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        spec = access_review_spec(user, info)
        key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
        cached = self._allowed.get(key) or self._denied.get(key)
        if cached is not None:
            return cached
        decision: Decision = await _once(self._pending, key, lambda: self._review(key, spec))
        return decision

    async def _review(self, key: str, spec: JSON) -> Decision:
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        try:
            status = (await self._client.request("POST", SUBJECT_ACCESS_REVIEWS, review)).get("status") or {}
        except ClusterError as exc:
            log.warning("SubjectAccessReview failed: %s", exc)
            # As upstream: an authorizer that could not decide is an internal error, not a 403.
            raise errors.internal_error(f"authorization failed: {exc}") from exc
        # The reason is kept either way, as upstream's webhook authorizer keeps it.
        decision = Decision(
            bool(status.get("allowed") and not status.get("denied")), str(status.get("reason", ""))
        )
        (self._allowed if decision.allowed else self._denied).put(key, decision)
        return decision


# --- kube-system/extension-apiserver-authentication ---------------------------------------------


def _header_list(data: JSON, key: str) -> tuple[str, ...]:
    try:
        values = json.loads(data.get(key) or "[]")
    except ValueError:
        return ()
    return tuple(str(v) for v in values or ())


@dataclass(frozen=True)
class ExtensionAuthentication:
    """What kube-apiserver publishes for extension servers: its client CA, and the front proxy's CA,
    allowed names and header names."""

    client_ca: bytes = b""
    requestheader_client_ca: bytes = b""
    requestheader_allowed_names: tuple[str, ...] = ()
    requestheader_username_headers: tuple[str, ...] = ()
    requestheader_uid_headers: tuple[str, ...] = ()
    requestheader_group_headers: tuple[str, ...] = ()
    requestheader_extra_headers_prefix: tuple[str, ...] = ()

    def request_header_part(self) -> tuple[object, ...]:
        """What the front-proxy authenticator is configured from."""
        return (
            self.requestheader_client_ca,
            self.requestheader_allowed_names,
            self.requestheader_username_headers,
            self.requestheader_uid_headers,
            self.requestheader_group_headers,
            self.requestheader_extra_headers_prefix,
        )

    @classmethod
    def from_configmap(cls, configmap: JSON) -> ExtensionAuthentication:
        data = configmap.get("data") or {}
        return cls(
            client_ca=str(data.get("client-ca-file", "")).encode(),
            requestheader_client_ca=str(data.get("requestheader-client-ca-file", "")).encode(),
            requestheader_allowed_names=_header_list(data, "requestheader-allowed-names"),
            requestheader_username_headers=_header_list(data, "requestheader-username-headers"),
            requestheader_uid_headers=_header_list(data, "requestheader-uid-headers"),
            requestheader_group_headers=_header_list(data, "requestheader-group-headers"),
            requestheader_extra_headers_prefix=_header_list(data, "requestheader-extra-headers-prefix"),
        )


@dataclass
class ExtensionAuthenticationFiles:
    """Keeps the published CAs as files under `directory` (`client-ca.crt`,
    `requestheader-client-ca.crt`), where the TLS context and the authenticators reload them
    from; `refresh` re-reads the ConfigMap and replaces a file only when its content changed.

    When what is published changed, `refresh` hands the new `ExtensionAuthentication` to each of
    `on_change` (after the files are in place); `follow` uses that to keep a front-proxy
    authenticator's header names, allowed names and CA current."""

    client: ClusterClient
    directory: Path
    current: ExtensionAuthentication = field(default_factory=ExtensionAuthentication)
    on_change: list[Callable[[ExtensionAuthentication], None]] = field(default_factory=list)

    @property
    def client_ca_file(self) -> Path:
        return self.directory / "client-ca.crt"

    @property
    def requestheader_client_ca_file(self) -> Path:
        return self.directory / "requestheader-client-ca.crt"

    async def refresh(self) -> ExtensionAuthentication:
        published = ExtensionAuthentication.from_configmap(
            await self.client.request("GET", AUTHENTICATION_CONFIGMAP)
        )
        for path, pem in (
            (self.client_ca_file, published.client_ca),
            (self.requestheader_client_ca_file, published.requestheader_client_ca),
        ):
            if pem.strip():
                x509.load_pem_x509_certificates(pem)  # refuse garbage before it replaces a good bundle
            old = path.read_bytes() if path.exists() else None
            if pem != old:
                pki.write_file_atomic(path, pem, 0o600)
        changed = published != self.current
        self.current = published
        if changed:
            for callback in self.on_change:
                try:
                    callback(published)
                except Exception:
                    log.exception("applying a change of extension-apiserver-authentication failed")
        return published

    def request_header_config(self, published: ExtensionAuthentication | None = None) -> RequestHeaderConfig:
        """The front-proxy configuration `published` (default: the current one) describes. Its CA
        bundle is a new one over the file, so it holds the CA written with these names; with no CA
        published it trusts no front proxy at all."""
        published = published or self.current
        files = [self.requestheader_client_ca_file] if published.requestheader_client_ca.strip() else []
        return RequestHeaderConfig(
            client_cas=pki.CABundle(files),
            allowed_names=published.requestheader_allowed_names,
            username_headers=published.requestheader_username_headers,
            uid_headers=published.requestheader_uid_headers,
            group_headers=published.requestheader_group_headers,
            extra_headers_prefixes=published.requestheader_extra_headers_prefix,
        )

    def follow(self, authenticator: RequestHeaderAuthenticator) -> None:
        """Reconfigure `authenticator` whenever the published front-proxy settings change."""
        applied = self.current.request_header_part()

        def apply(published: ExtensionAuthentication) -> None:
            nonlocal applied
            part = published.request_header_part()
            if part == applied:
                return  # only the client CA changed (its file is reloaded where it is used)
            config = self.request_header_config(published)
            authenticator.reconfigure(config)
            applied = part
            log.info(
                "front-proxy settings reloaded from extension-apiserver-authentication: username headers %s,"
                " group headers %s, uid headers %s, extra prefixes %s, allowed names %s",
                list(config.username_headers),
                list(config.group_headers),
                list(config.uid_headers),
                list(config.extra_headers_prefixes),
                list(config.allowed_names) or "(any)",
            )

        self.on_change.append(apply)

    async def keep_fresh(self, interval: float = 60.0) -> None:
        """Refresh forever (run as a task); failures keep the last good files and settings."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.refresh()
            except (ClusterError, ValueError, OSError) as exc:
                log.warning("extension-apiserver-authentication not refreshed: %s", exc)


async def fetch_extension_authentication(
    files: ExtensionAuthenticationFiles, *, attempts: int = 30, delay: float = 1.0
) -> ExtensionAuthentication:
    """The first read at start-up, retried for a while (the cluster may still be coming up)."""
    for attempt in range(attempts):
        try:
            return await files.refresh()
        except ClusterError as exc:
            if attempt == attempts - 1:
                raise
            log.warning("reading extension-apiserver-authentication: %s; retrying", exc)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")
