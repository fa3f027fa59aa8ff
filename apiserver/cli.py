"""`coreio-apiserver`: flags -> Settings -> a running server."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from apiserver import pki, standalone
from apiserver.app import build_app
from apiserver.auth.authn import (
    Authenticator,
    AuthenticatorChain,
    RequestHeaderAuthenticator,
    RequestHeaderConfig,
    TokenAuthenticator,
    X509Authenticator,
)
from apiserver.auth.authz import Authorizer
from apiserver.auth.delegated import (
    ClusterClient,
    ClusterConnection,
    ExtensionAuthenticationFiles,
    SubjectAccessReviewAuthorizer,
    TokenReviewAuthenticator,
    fetch_extension_authentication,
    in_cluster_connection,
    load_kubeconfig,
)
from apiserver.config import Settings, default_data_dir
from apiserver.http.limits import QuietMalformedRequests
from apiserver.http.middleware import audit_log
from apiserver.machinery.gofmt import parse_go_duration
from apiserver.machinery.user import UserInfo
from apiserver.rbac.chain import AuthorizationConfig
from apiserver.storage.interface import Storage

log = logging.getLogger("coreio")
MAX_REQUEST_LINE_BYTES = 1 << 20


def parse_args(argv: list[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(
        prog="coreio-apiserver",
        description="Serves RoleBindings (rbac.authorization.core.io/v1) and Events (events.core.io/v1).",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=default_data_dir(), help="where SQLite data and credentials live"
    )
    parser.add_argument("--bind-address", default="127.0.0.1", help="address to serve HTTPS on")
    parser.add_argument("--secure-port", type=int, default=8443, help="port to serve HTTPS on")
    parser.add_argument(
        "--etcd-servers",
        default="",
        help="comma-separated etcd endpoints; storage switches from SQLite to etcd",
    )
    parser.add_argument(
        "--etcd-prefix", default="", help="key prefix in etcd (default: none, keys start /registry)"
    )
    parser.add_argument("--etcd-cafile", default="")
    parser.add_argument("--etcd-certfile", default="")
    parser.add_argument("--etcd-keyfile", default="")
    parser.add_argument(
        "--tls-cert-file", default="", help="serving certificate (default: created in the data dir)"
    )
    parser.add_argument("--tls-private-key-file", default="")
    parser.add_argument("--client-ca-file", default="", help="CA that client certificates must chain to")
    parser.add_argument(
        "--token-auth-file", default="", help="static bearer tokens, kube-apiserver's CSV format"
    )
    parser.add_argument(
        "--requestheader-client-ca-file",
        default="",
        help="CA of the front proxy (the aggregator): only a client certificate it issued may assert"
        " a user in the --requestheader-*-headers",
    )
    parser.add_argument(
        "--requestheader-allowed-names",
        default="",
        help="comma-separated CNs of front-proxy client certificates allowed (default: any of that CA)",
    )
    parser.add_argument("--requestheader-username-headers", default="X-Remote-User")
    parser.add_argument(
        "--requestheader-uid-headers", default="", help="e.g. X-Remote-Uid (default: UIDs not read)"
    )
    parser.add_argument("--requestheader-group-headers", default="X-Remote-Group")
    parser.add_argument("--requestheader-extra-headers-prefix", default="X-Remote-Extra-")
    parser.add_argument(
        "--kubeconfig",
        default="",
        help="kubeconfig of the cluster to delegate to (both authentication and authorization)",
    )
    parser.add_argument(
        "--authentication-kubeconfig",
        default="",
        help="kubeconfig for TokenReviews and kube-system/extension-apiserver-authentication"
        " (CAs and header names not given as flags are read from it)",
    )
    parser.add_argument("--authorization-kubeconfig", default="", help="kubeconfig for SubjectAccessReviews")
    parser.add_argument(
        "--authorization-mode",
        default="RBAC",
        choices=["RBAC", "AlwaysAllow"],
        help="RBAC over the stored RoleBindings (default), or allow every authenticated request",
    )
    parser.add_argument(
        "--authorization-roles-file",
        default="",
        help="standalone: Roles and ClusterRoles (YAML or JSON) besides the default ClusterRoles",
    )
    parser.add_argument(
        "--authorize-endpoint-users", default="", help="comma-separated users who may call /authorize"
    )
    parser.add_argument(
        "--authorize-endpoint-groups", default="", help="comma-separated groups who may call /authorize"
    )
    parser.add_argument("--authentication-token-webhook-cache-ttl", type=float, default=10.0)
    parser.add_argument(
        "--extension-authentication-refresh-interval",
        type=float,
        default=60.0,
        help="seconds between re-reads of kube-system/extension-apiserver-authentication (CAs, front-proxy"
        " header and allowed names), when they come from the cluster",
    )
    parser.add_argument("--authorization-webhook-cache-ttl", type=float, default=10.0)
    parser.add_argument(
        "--audit-log-path",
        default="",
        help="write one audit.k8s.io/v1 Event (level Metadata) per request as a JSON line; - for stdout",
    )
    parser.add_argument("--event-ttl", type=int, default=3600, help="seconds an Event lives")
    parser.add_argument("--min-request-timeout", type=float, default=1800.0)
    parser.add_argument("--watch-bookmark-interval", type=float, default=60.0)
    parser.add_argument(
        "--max-requests-inflight",
        type=int,
        default=400,
        help="most read-only requests served at once, watches aside (0: no limit); more get 429",
    )
    parser.add_argument(
        "--max-mutating-requests-inflight",
        type=int,
        default=200,
        help="most mutating requests served at once (0: no limit); more get 429",
    )
    parser.add_argument(
        "--request-timeout",
        type=_duration,
        default=60.0,
        help="seconds (or a Go duration, 1m0s) before a request other than a watch is answered 504;"
        " idle or slow connections and stalled watches are closed after it too (0: no limit)",
    )
    parser.add_argument(
        "--compaction-interval", type=float, default=300.0, help="seconds between compactions (0: never)"
    )
    args = parser.parse_args(argv)
    if args.extension_authentication_refresh_interval <= 0:
        parser.error("--extension-authentication-refresh-interval must be positive")
    return Settings(
        data_dir=args.data_dir,
        bind_address=args.bind_address,
        secure_port=args.secure_port,
        etcd_servers=[s.strip() for s in args.etcd_servers.split(",") if s.strip()],
        etcd_prefix=args.etcd_prefix,
        etcd_cafile=args.etcd_cafile,
        etcd_certfile=args.etcd_certfile,
        etcd_keyfile=args.etcd_keyfile,
        tls_cert_file=args.tls_cert_file,
        tls_private_key_file=args.tls_private_key_file,
        client_ca_file=args.client_ca_file,
        token_auth_file=args.token_auth_file,
        requestheader_client_ca_file=args.requestheader_client_ca_file,
        requestheader_allowed_names=_comma_list(args.requestheader_allowed_names),
        requestheader_username_headers=_comma_list(args.requestheader_username_headers),
        requestheader_uid_headers=_comma_list(args.requestheader_uid_headers),
        requestheader_group_headers=_comma_list(args.requestheader_group_headers),
        requestheader_extra_headers_prefix=_comma_list(args.requestheader_extra_headers_prefix),
        audit_log_path=args.audit_log_path,
        kubeconfig=args.kubeconfig,
        authentication_kubeconfig=args.authentication_kubeconfig,
        authorization_kubeconfig=args.authorization_kubeconfig,
        authorization_mode=args.authorization_mode,
        authorization_roles_file=args.authorization_roles_file,
        authorize_endpoint_users=_comma_list(args.authorize_endpoint_users),
        authorize_endpoint_groups=_comma_list(args.authorize_endpoint_groups),
        authentication_cache_ttl=args.authentication_token_webhook_cache_ttl,
        extension_authentication_refresh_interval=args.extension_authentication_refresh_interval,
        authorization_cache_ttl=args.authorization_webhook_cache_ttl,
        event_ttl_seconds=args.event_ttl,
        min_request_timeout=args.min_request_timeout,
        watch_bookmark_interval=args.watch_bookmark_interval,
        max_requests_inflight=args.max_requests_inflight,
        max_mutating_requests_inflight=args.max_mutating_requests_inflight,
        request_timeout=args.request_timeout,
        compaction_interval=args.compaction_interval,
    )


def _duration(value: str) -> float:
    """Seconds: a number, or a Go duration as kube-apiserver's flag takes it (`1m0s`)."""
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parse_go_duration(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return seconds


def _comma_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def open_storage(settings: Settings) -> tuple[Storage, str]:
    # Bookmarks ride on the storage's progress notices: they must come at least as often.
    progress = min(5.0, settings.watch_bookmark_interval)
    if settings.etcd_servers:
        from apiserver.storage.etcd import EtcdStorage

        storage: Storage = EtcdStorage(
            settings.etcd_servers,
            prefix=settings.etcd_prefix,
            ca_file=settings.etcd_cafile or None,
            cert_file=settings.etcd_certfile or None,
            key_file=settings.etcd_keyfile or None,
            compaction_interval=settings.compaction_interval,
            progress_interval=progress,
        )
        return storage, f"etcd {','.join(settings.etcd_servers)}"
    from apiserver.storage.sqlite.backend import SQLiteStorage

    path = settings.data_dir / "coreio.db"
    storage = SQLiteStorage(
        str(path), compaction_interval=settings.compaction_interval, progress_interval=progress
    )
    return storage, f"sqlite {path}"


def _token_users(path: Path) -> dict[str, UserInfo]:
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


def configure_audit_log(path: str) -> None:
    """Send the audit logger's records (one JSON line each) to `path`; nothing when empty."""
    audit_log.propagate = False
    if not path:
        audit_log.disabled = True
        return
    handler: logging.Handler
    handler = (
        logging.StreamHandler(sys.stdout) if path == "-" else logging.FileHandler(path, encoding="utf-8")
    )
    handler.setFormatter(logging.Formatter("%(message)s"))
    audit_log.addHandler(handler)
    audit_log.setLevel(logging.INFO)
    audit_log.propagate = False


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

    async def close(self, _app: web.Application | None = None) -> None:
        for task in self.tasks:
            task.cancel()
        for client in self.clients:
            await client.close()


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
    client_cas = list(client_cas)
    requestheader: RequestHeaderConfig | None = None
    # Set when the front-proxy settings come from the cluster's ConfigMap (and follow its changes).
    published_source: ExtensionAuthenticationFiles | None = None
    if settings.client_ca_file:
        client_cas.append(Path(settings.client_ca_file))
    if settings.requestheader_client_ca_file:
        requestheader = request_header_config(settings, Path(settings.requestheader_client_ca_file))

    token_review: TokenReviewAuthenticator | None = None
    authn_kubeconfig = settings.authentication_kubeconfig or settings.kubeconfig
    if (authn_cluster := cluster_connection(authn_kubeconfig, settings)) is not None:
        client = ClusterClient(authn_cluster)
        security.clients.append(client)
        token_review = TokenReviewAuthenticator(client, cache_ttl=settings.authentication_cache_ttl)
        if not settings.client_ca_file or requestheader is None:
            published_files = ExtensionAuthenticationFiles(client, settings.data_dir / "delegated")
            published = await fetch_extension_authentication(published_files)
            log.info("read kube-system/extension-apiserver-authentication from the cluster")
            if not settings.client_ca_file and published.client_ca.strip():
                client_cas.append(published_files.client_ca_file)
            if requestheader is None and published.requestheader_client_ca.strip():
                requestheader = published_files.request_header_config(published)
                published_source = published_files
            # CA rotations in the cluster reach the files, and from there the TLS context and
            # the X509 authenticator (both reload changed files); changed front-proxy settings
            # reach the request-header authenticator (`follow`, below).
            refresh = published_files.keep_fresh(settings.extension_authentication_refresh_interval)
            security.tasks.append(asyncio.create_task(refresh))

    # The TLS layer accepts client certificates of both authorities; the authenticators tell them
    # apart (a front-proxy certificate is no user of its own, a client certificate asserts no
    # headers).
    security.trusted_cas = list(client_cas)
    if requestheader is not None:
        security.trusted_cas += list(requestheader.client_cas.files)
        front_proxy = RequestHeaderAuthenticator(requestheader)
        if published_source is not None:
            published_source.follow(front_proxy)
        security.authenticators.append(front_proxy)
    security.authenticators += [X509Authenticator(pki.CABundle(client_cas)), TokenAuthenticator(tokens)]
    if token_review is not None:
        security.authenticators.append(token_review)

    authz_kubeconfig = settings.authorization_kubeconfig or settings.kubeconfig
    if (authz_cluster := cluster_connection(authz_kubeconfig, settings)) is not None:
        if authz_kubeconfig == authn_kubeconfig and security.clients:
            client = security.clients[0]
        else:
            client = ClusterClient(authz_cluster)
            security.clients.append(client)
        security.cluster = authz_cluster
        security.delegate = SubjectAccessReviewAuthorizer(
            client, allow_ttl=settings.authorization_cache_ttl, deny_ttl=settings.authorization_cache_ttl
        )
    return security


async def serve(settings: Settings) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    tokens: dict[str, UserInfo] = {}
    kubeconfig: Path | None = None
    if settings.standalone:
        files = standalone.bootstrap(
            settings.data_dir, bind_address=settings.bind_address, port=settings.secure_port
        )
        cert_file, key_file = files.serving_cert, files.serving_key
        client_cas = [files.ca_cert]
        tokens.update(_token_users(files.token_file))
        kubeconfig = files.kubeconfig
        url = files.server_url
    else:
        cert_file, key_file = Path(settings.tls_cert_file), Path(settings.tls_private_key_file)
        client_cas = []
        url = f"https://{settings.bind_address}:{settings.secure_port}"
    if settings.token_auth_file:
        tokens.update(_token_users(Path(settings.token_auth_file)))
    security = await configure_security(settings, client_cas, tokens)
    serving = pki.ServingCertificate(cert_file, key_file, security.trusted_cas or None)
    storage, storage_desc = open_storage(settings)
    configure_audit_log(settings.audit_log_path)
    authorization = AuthorizationConfig(
        mode=settings.authorization_mode,
        roles_file=Path(settings.authorization_roles_file) if settings.authorization_roles_file else None,
        cluster=security.cluster,
        delegate=security.delegate,
        webhook_users=tuple(settings.authorize_endpoint_users),
        webhook_groups=tuple(settings.authorize_endpoint_groups),
    )
    app = build_app(settings, storage, AuthenticatorChain(security.authenticators), authorization)
    app.on_cleanup.append(security.close)
    # aiohttp's keep-alive timer also runs from a connection's start and ends a connection whose
    # request has not fully arrived by then: with it, idle connections and slow-loris clients are
    # closed after the request timeout (upstream: ReadHeaderTimeout 32 s, IdleTimeout 90 s).
    # Request lines up to upstream's MaxHeaderBytes (1 MiB), for long label and field selectors.
    # A client that goes away cancels its handler, as it cancels the request's context upstream:
    # a watch whose client left ends at once instead of at its next event or its timeout.
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        handler_cancellation=True,
        shutdown_timeout=5,
        keepalive_timeout=settings.request_timeout or 90.0,
        max_line_size=MAX_REQUEST_LINE_BYTES,
    )
    await runner.setup()
    site = web.TCPSite(runner, settings.bind_address, settings.secure_port, ssl_context=serving.context)
    await site.start()
    log.info("coreio-apiserver serving on %s (storage: %s)", url, storage_desc)
    if kubeconfig is not None:
        log.info(
            "kubeconfig written to %s; try: kubectl --kubeconfig %s api-resources", kubeconfig, kubeconfig
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    log.info("shutting down")
    await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    logging.getLogger("aiohttp.server").addFilter(QuietMalformedRequests())
    settings = parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(settings))
