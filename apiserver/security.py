"""Who a request is and who decides what it may do, assembled from the settings: the
authenticators (front proxy, client certificates, static tokens, TokenReview), the delegated
SubjectAccessReview authorizer and the CAs the TLS layer accepts.

Standalone, everything comes from files; in a cluster (a kubeconfig, or the pod's own
credentials), what flags leave out comes from the cluster and follows its changes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from apiserver import pki, standalone
from apiserver.admission.namespace import NamespaceLifecycle
from apiserver.admission.objects import AdmissionSource
from apiserver.admission.sources import ClusterSource, ManifestSource
from apiserver.auth.authn import (
    Authenticator,
    RequestHeaderAuthenticator,
    RequestHeaderConfig,
    TokenAuthenticator,
    X509Authenticator,
)
from apiserver.auth.authz import Authorizer
from apiserver.auth.delegated import (
    ExtensionAuthenticationFiles,
    SubjectAccessReviewAuthorizer,
    TokenReviewAuthenticator,
    fetch_extension_authentication,
)
from apiserver.cluster.connection import (
    ClusterClient,
    ClusterConnection,
    in_cluster_connection,
    load_kubeconfig,
)
from apiserver.cluster.reflector import ClusterReader
from apiserver.config import NAMESPACE_LIFECYCLE, Settings
from apiserver.machinery.user import UserInfo
from apiserver.rbac.chain import AuthorizationConfig

log = logging.getLogger("coreio")


def token_users(path: Path) -> dict[str, UserInfo]:
    """The users of a static token file (kube-apiserver's --token-auth-file), by token."""
    return {
        token: UserInfo(name=entry.user, uid=entry.uid, groups=entry.groups)
        for token, entry in standalone.load_token_file(path).items()
    }


def request_header_config(settings: Settings, ca_file: Path) -> RequestHeaderConfig:
    return RequestHeaderConfig(
        client_cas=pki.CABundle([ca_file]),
        allowed_names=tuple(settings.requestheader_allowed_names),
        username_headers=tuple(settings.requestheader_username_headers),
        uid_headers=tuple(settings.requestheader_uid_headers),
        group_headers=tuple(settings.requestheader_group_headers),
        extra_headers_prefixes=tuple(settings.requestheader_extra_headers_prefix),
    )


@dataclass
class Security:
    """Who is asked who a request is, what it may do, and which CAs the TLS layer accepts."""

    authenticators: list[Authenticator]
    trusted_cas: list[Path]
    # The cluster's SubjectAccessReview authorizer, and the cluster whose Roles are watched.
    delegate: Authorizer | None = None
    cluster: ClusterConnection | None = None
    clients: list[ClusterClient] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    # The cluster's namespaces, read once for namespace lifecycle and the admission policies.
    namespaces: NamespaceLifecycle | None = None

    def authorization_config(self, settings: Settings) -> AuthorizationConfig:
        """What coreio's own authorization is told: the flags, and the cluster to delegate to."""
        roles_file = settings.authorization_roles_file
        return AuthorizationConfig(
            mode=settings.authorization_mode,
            roles_file=Path(roles_file) if roles_file else None,
            cluster=self.cluster,
            delegate=self.delegate,
            webhook_users=tuple(settings.authorize_endpoint_users),
            webhook_groups=tuple(settings.authorize_endpoint_groups),
        )

    def namespace_lifecycle(self, settings: Settings) -> NamespaceLifecycle | None:
        """Namespace lifecycle admission over the cluster's namespaces, read with the core
        kubeconfig (or the delegation's, or the pod's own credentials); none standalone."""
        if NAMESPACE_LIFECYCLE in settings.disable_admission_plugins:
            return None
        return self._namespaces(settings)

    def _namespaces(self, settings: Settings) -> NamespaceLifecycle | None:
        if self.namespaces is None:
            kubeconfig = settings.kubeconfig or settings.authorization_kubeconfig
            cluster = cluster_connection(kubeconfig or settings.authentication_kubeconfig, settings)
            self.namespaces = NamespaceLifecycle.over(ClusterReader(cluster)) if cluster is not None else None
        return self.namespaces

    def admission_source(self, settings: Settings) -> AdmissionSource | None:
        """Where the admission policies and webhooks come from: the file given, else the cluster
        (none standalone without a file). Raises ManifestError for a file that cannot be read."""
        if settings.admission_config_file:
            return ManifestSource.from_file(Path(settings.admission_config_file))
        namespaces = self._namespaces(settings)
        if namespaces is None:
            return None
        return ClusterSource(ClusterReader(namespaces.namespaces.reader.connection), namespaces)

    async def close(self, _app: web.Application | None = None) -> None:
        for task in self.tasks:
            task.cancel()
        for client in self.clients:
            await client.close()


@dataclass
class _Authorities:
    """Whom authentication trusts: the CAs of client certificates, and the front proxy (with the
    cluster's published settings it follows, when they came from there)."""

    client_cas: list[Path]
    requestheader: RequestHeaderConfig | None = None
    published: ExtensionAuthenticationFiles | None = None


def cluster_connection(kubeconfig: str, settings: Settings) -> ClusterConnection | None:
    """The cluster to delegate to: the kubeconfig's, or, as upstream's delegating options do with
    no kubeconfig, the pod's own in-cluster credentials when the server runs in a pod with a
    serving certificate of its own (never in the standalone default)."""
    if kubeconfig:
        return load_kubeconfig(Path(kubeconfig))
    if settings.standalone:
        return None
    connection = in_cluster_connection()
    if connection is not None:
        log.info("delegating authentication and authorization to the cluster (in-cluster credentials)")
    return connection


async def configure_security(
    settings: Settings, client_cas: list[Path], tokens: dict[str, UserInfo]
) -> Security:
    """Authenticators in upstream's order (front proxy, client certificate, static tokens,
    TokenReview) and the authorizer, from flags or, with a kubeconfig, from the cluster: CA files
    and header names not given as flags come from kube-system/extension-apiserver-authentication."""
    security = Security(authenticators=[], trusted_cas=[])
    authorities = _Authorities(list(client_cas))
    if settings.client_ca_file:
        authorities.client_cas.append(Path(settings.client_ca_file))
    if settings.requestheader_client_ca_file:
        authorities.requestheader = request_header_config(
            settings, Path(settings.requestheader_client_ca_file)
        )
    token_review = await _delegate_authentication(settings, security, authorities)
    _add_authenticators(security, authorities, tokens)
    if token_review is not None:
        security.authenticators.append(token_review)
    _delegate_authorization(settings, security)
    return security


async def _delegate_authentication(
    settings: Settings, security: Security, authorities: _Authorities
) -> TokenReviewAuthenticator | None:
    """With a cluster: its TokenReview, and the CAs and front-proxy settings the flags leave out,
    read from the cluster's ConfigMap and kept fresh."""
    cluster = cluster_connection(settings.authentication_kubeconfig or settings.kubeconfig, settings)
    if cluster is None:
        return None
    client = ClusterClient(cluster)
    security.clients.append(client)
    token_review = TokenReviewAuthenticator(client, cache_ttl=settings.authentication_cache_ttl)
    if settings.client_ca_file and authorities.requestheader is not None:
        return token_review
    files = ExtensionAuthenticationFiles(client, settings.data_dir / "delegated")
    published = await fetch_extension_authentication(files)
    log.info("read kube-system/extension-apiserver-authentication from the cluster")
    if not settings.client_ca_file and published.client_ca.strip():
        authorities.client_cas.append(files.client_ca_file)
    if authorities.requestheader is None and published.requestheader_client_ca.strip():
        authorities.requestheader = files.request_header_config(published)
        authorities.published = files
    # CA rotations in the cluster reach the files, and from there the TLS context and the X509
    # authenticator (both reload changed files); changed front-proxy settings reach the
    # request-header authenticator (`follow`, in `_add_authenticators`).
    refresh = files.keep_fresh(settings.extension_authentication_refresh_interval)
    security.tasks.append(asyncio.create_task(refresh))
    return token_review


def _add_authenticators(security: Security, authorities: _Authorities, tokens: dict[str, UserInfo]) -> None:
    # The TLS layer accepts client certificates of both authorities; the authenticators tell them
    # apart (a front-proxy certificate is no user of its own, a client certificate asserts no
    # headers).
    security.trusted_cas = list(authorities.client_cas)
    if authorities.requestheader is not None:
        security.trusted_cas += list(authorities.requestheader.client_cas.files)
        front_proxy = RequestHeaderAuthenticator(authorities.requestheader)
        if authorities.published is not None:
            authorities.published.follow(front_proxy)
        security.authenticators.append(front_proxy)
    security.authenticators += [
        X509Authenticator(pki.CABundle(authorities.client_cas)),
        TokenAuthenticator(tokens),
    ]


def _delegate_authorization(settings: Settings, security: Security) -> None:
    """With a cluster: its SubjectAccessReview, and its Roles for coreio's RBAC (one client when
    authentication asks the same cluster)."""
    authn_kubeconfig = settings.authentication_kubeconfig or settings.kubeconfig
    authz_kubeconfig = settings.authorization_kubeconfig or settings.kubeconfig
    cluster = cluster_connection(authz_kubeconfig, settings)
    if cluster is None:
        return
    if authz_kubeconfig == authn_kubeconfig and security.clients:
        client = security.clients[0]
    else:
        client = ClusterClient(cluster)
        security.clients.append(client)
    security.cluster = cluster
    security.delegate = SubjectAccessReviewAuthorizer(
        client, allow_ttl=settings.authorization_cache_ttl, deny_ttl=settings.authorization_cache_ttl
    )
