"""The run loop: storage, security and the application assembled for the served kinds, served over
HTTPS until SIGINT or SIGTERM, then shut down gracefully."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from apiserver import pki, standalone
from apiserver.app import build_app
from apiserver.auth.authn import AuthenticatorChain
from apiserver.config import Settings
from apiserver.machinery.user import UserInfo
from apiserver.resources import KINDS
from apiserver.resources.base import ResourceKind
from apiserver.security import configure_audit_log, configure_security, token_users
from apiserver.storage.factory import StorageOptions, open_storage

log = logging.getLogger("coreio")
# Request lines up to upstream's MaxHeaderBytes (1 MiB), for long label and field selectors.
MAX_REQUEST_LINE_BYTES = 1 << 20
# Watch bookmarks ride on the storage's progress notices: these come at least this often.
MAX_PROGRESS_INTERVAL = 5.0


@dataclass
class Endpoint:
    """Where the server is reached and with what it identifies itself and its clients: the
    standalone data directory's files, or the ones the flags name."""

    url: str
    cert_file: Path
    key_file: Path
    client_cas: list[Path] = field(default_factory=list)
    tokens: dict[str, UserInfo] = field(default_factory=dict)
    # Standalone: the admin's kubeconfig written for this server.
    kubeconfig: Path | None = None


def endpoint(settings: Settings) -> Endpoint:
    """Standalone: the data directory's CA, serving certificate, admin token and kubeconfig, made
    or refreshed. Otherwise the files the flags name. Either way, --token-auth-file's users."""
    if settings.standalone:
        files = standalone.bootstrap(
            settings.data_dir, bind_address=settings.bind_address, port=settings.secure_port
        )
        found = Endpoint(
            files.server_url,
            files.serving_cert,
            files.serving_key,
            client_cas=[files.ca_cert],
            tokens=token_users(files.token_file),
            kubeconfig=files.kubeconfig,
        )
    else:
        url = f"https://{settings.bind_address}:{settings.secure_port}"
        found = Endpoint(url, Path(settings.tls_cert_file), Path(settings.tls_private_key_file))
    if settings.token_auth_file:
        found.tokens.update(token_users(Path(settings.token_auth_file)))
    return found


def storage_options(settings: Settings) -> StorageOptions:
    return StorageOptions(
        sqlite_path=settings.data_dir / "coreio.db",
        etcd_servers=tuple(settings.etcd_servers),
        etcd_prefix=settings.etcd_prefix,
        etcd_ca_file=settings.etcd_cafile,
        etcd_cert_file=settings.etcd_certfile,
        etcd_key_file=settings.etcd_keyfile,
        compaction_interval=settings.compaction_interval,
        progress_interval=min(MAX_PROGRESS_INTERVAL, settings.watch_bookmark_interval),
    )


async def serve(settings: Settings, kinds: Sequence[ResourceKind] = KINDS) -> None:
    """Serves `kinds` as `settings` say until SIGINT or SIGTERM."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    reached = endpoint(settings)
    security = await configure_security(settings, reached.client_cas, reached.tokens)
    serving = pki.ServingCertificate(reached.cert_file, reached.key_file, security.trusted_cas or None)
    storage, storage_desc = open_storage(storage_options(settings))
    configure_audit_log(settings.audit_log_path)
    authenticator = AuthenticatorChain(security.authenticators)
    app = build_app(
        settings,
        storage,
        authenticator,
        security.authorization_config(settings),
        kinds,
        namespaces=security.namespace_lifecycle(settings),
    )
    app.on_cleanup.append(security.close)
    runner = await start(app, settings, serving.context)
    log.info("coreio-apiserver serving on %s (storage: %s)", reached.url, storage_desc)
    if reached.kubeconfig is not None:
        log.info(
            "kubeconfig written to %s; try: kubectl --kubeconfig %s api-resources",
            reached.kubeconfig,
            reached.kubeconfig,
        )
    await stopped()
    log.info("shutting down")
    await runner.cleanup()


async def start(app: web.Application, settings: Settings, context: ssl.SSLContext) -> web.AppRunner:
    """`app` listening on the bind address and port, over TLS."""
    # aiohttp's keep-alive timer also runs from a connection's start and ends a connection whose
    # request has not fully arrived by then: with it, idle connections and slow-loris clients are
    # closed after the request timeout (upstream: ReadHeaderTimeout 32 s, IdleTimeout 90 s).
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
    site = web.TCPSite(runner, settings.bind_address, settings.secure_port, ssl_context=context)
    await site.start()
    return runner


async def stopped() -> None:
    """Returns at the first SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()


def run(settings: Settings, kinds: Sequence[ResourceKind] = KINDS) -> None:
    """`serve` in a fresh event loop; an interrupt before the signal handlers are set ends quietly."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(settings, kinds))
