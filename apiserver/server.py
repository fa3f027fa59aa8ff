"""The run loop. The data directory and the port are taken first, then the endpoint and its
certificates, security, the storage and the application assembled for the served kinds are set up
and served over HTTPS until SIGINT or SIGTERM; then the server shuts down gracefully, as
kube-apiserver does. Whatever keeps it from starting is a StartError, worded as the one line the
command prints."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import socket
import ssl
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from aiohttp import web
from cryptography.exceptions import UnsupportedAlgorithm

from apiserver import pki, standalone
from apiserver.admission.objects import AdmissionSource
from apiserver.app import SYSTEM_KEY, build_app
from apiserver.audit import backend
from apiserver.audit.backend import AuditOptions
from apiserver.audit.logfile import Rotation
from apiserver.audit.policy import PolicyError
from apiserver.audit.webhook.backend import WebhookOptions, WebhookOptionsError
from apiserver.audit.webhook.batch import BatchConfig
from apiserver.audit.webhook.client import WebhookConfigError
from apiserver.audit.webhook.truncate import TruncateConfig
from apiserver.auth.authn import AuthenticatorChain
from apiserver.config import Settings
from apiserver.http.acceptor import Acceptor
from apiserver.http.lifecycle import LIFECYCLE_KEY, Lifecycle
from apiserver.http.system import SystemEndpoints
from apiserver.http.workermetrics import WorkerSet
from apiserver.machinery import eventloop
from apiserver.machinery.manifest import ManifestError
from apiserver.machinery.user import UserInfo
from apiserver.registry.stored import storage_root
from apiserver.resources import KINDS
from apiserver.resources.base import ResourceKind
from apiserver.security import Security, configure_security, token_users
from apiserver.storage.factory import StorageOptions, open_storage
from apiserver.storage.interface import StorageError
from apiserver.storage.pipes import WorkerPipes

log = logging.getLogger("coreio")
# Request lines up to upstream's MaxHeaderBytes (1 MiB), for long label and field selectors.
MAX_REQUEST_LINE_BYTES = 1 << 20
# Watch bookmarks ride on the storage's progress notices: these come at least this often.
MAX_PROGRESS_INTERVAL = 5.0
# A starting server gives its storage this long to answer (asking again every quarter second).
STORAGE_START_TIMEOUT = 5.0
STORAGE_RETRY_INTERVAL = 0.25
# How long requests in flight at shutdown may take to finish when --request-timeout is 0
# (upstream's ShutdownTimeout is the request timeout, 60 s by default).
DEFAULT_SHUTDOWN_TIMEOUT = 60.0
# Then how long aiohttp gives what is left before cancelling it.
STRAGGLER_TIMEOUT = 5.0
LISTEN_BACKLOG = 128
# How often a worker that listens once ready asks whether it is.
READY_POLL_INTERVAL = 0.05

T = TypeVar("T")


class StartError(Exception):
    """Why the server cannot start, worded as its one line on stderr (kube-apiserver's wording where
    it has one)."""


def go_os_error(exc: OSError, op: str = "open") -> str:
    """An OSError as Go's os package words it: `open /x: no such file or directory`."""
    reason = exc.strerror or str(exc)
    reason = reason[:1].lower() + reason[1:]
    return f"{op} {exc.filename}: {reason}" if exc.filename is not None else reason


def _problem(exc: BaseException) -> str:
    return go_os_error(exc) if isinstance(exc, OSError) else str(exc)


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
        try:
            files = standalone.bootstrap(
                settings.data_dir, bind_address=settings.bind_address, port=settings.secure_port
            )
        except (OSError, ValueError) as exc:
            raise StartError(
                f"failed to prepare data directory {settings.data_dir}: {_problem(exc)}"
            ) from None
        found = Endpoint(
            files.server_url,
            files.serving_cert,
            files.serving_key,
            client_cas=[files.ca_cert],
            tokens=_token_users(files.token_file),
            kubeconfig=files.kubeconfig,
        )
    else:
        url = f"https://{settings.bind_address}:{settings.secure_port}"
        found = Endpoint(url, Path(settings.tls_cert_file), Path(settings.tls_private_key_file))
    if settings.token_auth_file:
        found.tokens.update(_token_users(Path(settings.token_auth_file)))
    return found


def _token_users(path: Path) -> dict[str, UserInfo]:
    try:
        return token_users(path)
    except (OSError, ValueError) as exc:
        raise StartError(f"failed to load token file {path}: {_problem(exc)}") from None


def storage_options(settings: Settings, kinds: Sequence[ResourceKind] = ()) -> StorageOptions:
    """Where the settings store the objects of `kinds` (each kind's resource cached in memory unless
    --watch-cache=false)."""
    return StorageOptions(
        sqlite_path=settings.data_dir / "coreio.db",
        etcd_servers=tuple(settings.etcd_servers),
        etcd_prefix=settings.etcd_prefix,
        etcd_ca_file=settings.etcd_cafile,
        etcd_cert_file=settings.etcd_certfile,
        etcd_key_file=settings.etcd_keyfile,
        compaction_interval=settings.compaction_interval,
        sqlite_shared=settings.workers > 1,
        progress_interval=min(MAX_PROGRESS_INTERVAL, settings.watch_bookmark_interval),
        cache_roots=tuple(storage_root(kind) for kind in kinds) if settings.watch_cache else (),
        watch_cache_size=settings.default_watch_cache_size,
    )


# --- what is checked before anything is served --------------------------------------------------


@contextmanager
def own_data_dir(settings: Settings) -> Iterator[None]:
    """The data directory held by this process while inside (whatever the storage: standalone it
    holds the certificates and the kubeconfig, on SQLite the database, in a cluster the delegated
    CAs). A second server on it is refused, naming the first; a crashed one's lock is gone with it."""
    address = standalone.server_url(settings.bind_address, settings.secure_port)
    try:
        lock = standalone.lock_data_dir(settings.data_dir, address)
    except standalone.DataDirInUseError as exc:
        raise StartError(str(exc)) from None
    except OSError as exc:
        raise StartError(f"failed to lock data directory {settings.data_dir}: {go_os_error(exc)}") from None
    try:
        yield
    finally:
        lock.release()


def _host_port(host: str, port: int) -> str:
    """Go's net.JoinHostPort."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listen(bind_address: str, port: int, *, backlog: int = LISTEN_BACKLOG) -> socket.socket:
    """The listening socket, taken before anything is set up (as upstream creates its listener
    first): a port in use is reported at once, in kube-apiserver's words. `backlog`: the
    connections the kernel holds for it until they are accepted (a server of several workers
    shares one socket, and so holds as many for each)."""
    where = _host_port(bind_address, port)
    failed = f"failed to listen on {where}: listen tcp"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            bind_address or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        reason = exc.strerror or str(exc)
        raise StartError(f"{failed}: lookup {bind_address}: {reason[:1].lower()}{reason[1:]}") from None
    sock = socket.socket(family, kind, proto)
    step = "bind"
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        step = "listen"
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise StartError(f"{failed} {where}: {step}: {go_os_error(exc)}") from None
    return sock


def _load(path: Path, load: Callable[[Path], T], failed: str, unparsable: str) -> T:
    try:
        return load(path)
    except OSError as exc:
        raise StartError(f"{failed}: {go_os_error(exc)}") from None
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise StartError(f"{failed}: {unparsable}") from None


def check_serving_files(cert_file: Path, key_file: Path) -> None:
    """StartError unless the serving certificate and key can be read and make a pair (Go's tls
    package's words for what is wrong)."""
    failed = f"failed to load serving certificate {cert_file} and key {key_file}"
    certificates = _load(
        cert_file, pki.load_certificates, failed, "tls: failed to find any PEM data in certificate input"
    )
    key = _load(key_file, pki.load_private_key, failed, "tls: failed to find any PEM data in key input")
    if not pki.key_matches(certificates[0], key):
        raise StartError(f"{failed}: tls: private key does not match public key")


def check_ca_files(paths: Sequence[Path]) -> None:
    """StartError unless each CA bundle the TLS layer trusts can be read and holds a certificate."""
    for path in paths:
        _load(
            path,
            pki.load_certificates,
            f"failed to load CA bundle {path}",
            "data does not contain any valid RSA or ECDSA certificates",
        )


async def check_storage(options: StorageOptions) -> None:
    """StartError unless the storage starts and answers within STORAGE_START_TIMEOUT. Asked through
    a client of its own without background work, so that nothing else tries (and logs) meanwhile."""
    timeout = STORAGE_START_TIMEOUT
    storage, described = open_storage(dataclasses.replace(options, compaction_interval=0))
    last: BaseException | None = None
    try:
        async with asyncio.timeout(timeout):
            await storage.start()
            while True:
                try:
                    await storage.current_revision()
                    return
                except (StorageError, OSError) as exc:
                    last = exc
                await asyncio.sleep(STORAGE_RETRY_INTERVAL)
    except TimeoutError:
        reason = _problem(last) if last is not None else "no answer"
        raise StartError(f"cannot reach the storage ({described}) within {timeout:g}s: {reason}") from None
    except (StorageError, OSError) as exc:
        raise StartError(f"failed to start the storage ({described}): {_problem(exc)}") from None
    finally:
        await storage.close()


# --- serving ------------------------------------------------------------------------------------


@dataclass
class Started:
    """A server set up and not yet serving: its runner, its lifecycle, and its storage in words."""

    runner: web.AppRunner
    lifecycle: Lifecycle
    storage: str


async def serve(settings: Settings, kinds: Sequence[ResourceKind] = KINDS) -> None:
    """Serves `kinds` as `settings` say until SIGINT or SIGTERM, then shuts down gracefully; a
    second signal ends the process at once. StartError: why it could not start."""
    signals = Signals()
    with own_data_dir(settings), closing(listen(settings.bind_address, settings.secure_port)) as sock:
        await serve_on(settings, kinds, sock, prepare(settings), signals)


def prepare(settings: Settings) -> Endpoint:
    """What is set up once for the whole server before it serves: the endpoint and its files."""
    reached = endpoint(settings)
    if not settings.standalone:
        check_serving_files(reached.cert_file, reached.key_file)
    # The CA files the flags name (the cluster's, read later, are checked as they come).
    named = (settings.client_ca_file, settings.requestheader_client_ca_file)
    check_ca_files([Path(path) for path in named if path])
    return reached


async def serve_on(
    settings: Settings,
    kinds: Sequence[ResourceKind],
    sock: socket.socket,
    reached: Endpoint,
    signals: Signals,
    workers: WorkerSet | None = None,
    pipes: WorkerPipes | None = None,
) -> None:
    """Serves on the listening socket `sock` until `signals` say stop: the whole life of the
    server, or of one of its `workers` (the first of which logs where it serves; `pipes`: this
    worker's ends of the pipes its storage shares with the others). A worker but the first accepts on the
    socket the workers share only once it is ready, so that no connection meets it unready."""
    announce = workers is None or workers.index == 0
    # Its count goes to the other workers from the start: as not accepting, until it does.
    acceptor = Acceptor(sock, workers.shares, workers.index) if workers and workers.shares else None
    security = await configure_security(settings, reached.client_cas, reached.tokens)
    try:
        serving = serving_certificate(reached, security.trusted_cas)
        await check_storage(storage_options(settings))
        started = await start(settings, kinds, security, workers, pipes)
    except BaseException:
        await security.close()
        raise
    waits = workers is not None and workers.index > 0
    if waits and not await ready_or_stopped(started.runner.app[SYSTEM_KEY], signals):
        await started.runner.cleanup()
        return
    handler = started.runner.server
    assert handler is not None  # the runner is set up
    listener = await accepting(sock, started.lifecycle.accepting(handler), serving.context, acceptor)
    log.log(
        logging.INFO if announce else logging.DEBUG,
        "coreio-apiserver serving on %s (storage: %s%s; event loop: %s)",
        reached.url,
        started.storage,
        f"; {workers.count} workers" if workers else "",
        eventloop.name(),
    )
    if reached.kubeconfig is not None and announce:
        log.info(
            "kubeconfig written to %s; try: kubectl --kubeconfig %s api-resources",
            reached.kubeconfig,
            reached.kubeconfig,
        )
    await signals.received()
    await shut_down(settings, started.runner, listener, started.lifecycle)


async def accepting(
    sock: socket.socket,
    factory: Callable[[], asyncio.Protocol],
    context: ssl.SSLContext,
    acceptor: Acceptor | None,
) -> asyncio.Server | Acceptor:
    """Connections of `sock` served by `factory`'s protocols over TLS: this worker's share of them
    through its `acceptor` when the workers share the socket, else all."""
    if acceptor is not None:
        acceptor.start(factory, context)
        return acceptor
    loop = asyncio.get_running_loop()
    return await loop.create_server(factory, sock=sock, ssl=context, backlog=LISTEN_BACKLOG)


async def ready_or_stopped(system: SystemEndpoints, signals: Signals) -> bool:
    """Once the server's /readyz checks pass, True; False if it is told to stop first."""
    while not signals.stopping:
        if await system.ready():
            return True
        with suppress(TimeoutError):
            async with asyncio.timeout(READY_POLL_INTERVAL):
                await signals.received()
    return False


def serving_certificate(reached: Endpoint, trusted_cas: list[Path]) -> pki.ServingCertificate:
    """The TLS context's certificate, key and client CAs; StartError when one cannot be used."""
    check_ca_files(trusted_cas)
    try:
        return pki.ServingCertificate(reached.cert_file, reached.key_file, trusted_cas or None)
    except (OSError, ssl.SSLError) as exc:
        raise StartError(f"failed to set up TLS: {_problem(exc)}") from None


def configure_audit(settings: Settings) -> None:
    """The audit policy read, the audit log opened and the webhook set up; StartError when one
    cannot be."""
    rotation = Rotation(settings.audit_log_maxsize, settings.audit_log_maxbackup, settings.audit_log_maxage)
    options = AuditOptions(
        settings.audit_log_path, settings.audit_policy_file, rotation, webhook_options(settings)
    )
    try:
        backend.configure(options)
    except PolicyError as exc:
        raise StartError(f"loading audit policy file: {exc}") from None
    except OSError as exc:
        raise StartError(f"failed to open audit log: {go_os_error(exc)}") from None
    except WebhookOptionsError as exc:
        raise StartError(str(exc)) from None
    except WebhookConfigError as exc:
        raise StartError(f"initializing audit webhook: {exc}") from None


def webhook_options(settings: Settings) -> WebhookOptions:
    """The --audit-webhook-* flags."""
    batch = BatchConfig(
        settings.audit_webhook_batch_buffer_size,
        settings.audit_webhook_batch_max_size,
        settings.audit_webhook_batch_max_wait,
        settings.audit_webhook_batch_throttle_enable,
        settings.audit_webhook_batch_throttle_qps,
        settings.audit_webhook_batch_throttle_burst,
    )
    truncate = TruncateConfig(
        settings.audit_webhook_truncate_enabled,
        settings.audit_webhook_truncate_max_batch_size,
        settings.audit_webhook_truncate_max_event_size,
    )
    return WebhookOptions(
        settings.audit_webhook_config_file,
        settings.audit_webhook_mode,
        batch,
        truncate,
        settings.audit_webhook_initial_backoff,
        settings.audit_webhook_version,
    )


async def start_audit(_app: web.Application) -> None:
    backend.BACKEND.start()


async def stop_audit(_app: web.Application) -> None:
    """Once the requests are done: the audit webhook's last events sent."""
    await backend.BACKEND.stop()


def admission_source(security: Security, settings: Settings) -> AdmissionSource | None:
    try:
        return security.admission_source(settings)
    except ManifestError as exc:
        raise StartError(f"--admission-config-file: {exc}") from None


async def start(
    settings: Settings,
    kinds: Sequence[ResourceKind],
    security: Security,
    workers: WorkerSet | None = None,
    pipes: WorkerPipes | None = None,
) -> Started:
    """The application set up (storage started, authorization's background work running), not
    yet listening."""
    admission = admission_source(security, settings)
    options = storage_options(settings, kinds)
    if pipes is not None:
        options = dataclasses.replace(options, first_fill=pipes.first_fill, doorbell=pipes.doorbell)
    storage, described = open_storage(options)
    configure_audit(settings)
    app = build_app(
        settings,
        storage,
        AuthenticatorChain(security.authenticators),
        security.authorization_config(settings),
        kinds,
        namespaces=security.namespace_lifecycle(settings),
        workers=workers,
        admission=admission,
        hold=options.hold,
    )
    app.on_cleanup.append(security.close)
    app.on_startup.append(start_audit)
    app.on_cleanup.append(stop_audit)
    lifecycle = app[LIFECYCLE_KEY] = Lifecycle()
    # Outermost, so that it counts each request until its answer is written.
    app.middlewares.insert(0, lifecycle.middleware)
    app.on_response_prepare.append(lifecycle.on_response_prepare)
    runner = make_runner(app, settings)
    try:
        await runner.setup()
    except (StorageError, OSError) as exc:
        await runner.cleanup()
        raise StartError(f"failed to start the storage ({described}): {_problem(exc)}") from None
    return Started(runner, lifecycle, described)


def make_runner(app: web.Application, settings: Settings) -> web.AppRunner:
    """The runner serving `app`: idle and slow connections limited by the request timeout."""
    # aiohttp's keep-alive timer also runs from a connection's start and ends a connection whose
    # request has not fully arrived by then: with it, idle connections and slow-loris clients are
    # closed after the request timeout (upstream: ReadHeaderTimeout 32 s, IdleTimeout 90 s).
    # A client that goes away cancels its handler, as it cancels the request's context upstream:
    # a watch whose client left ends at once instead of at its next event or its timeout.
    return web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        handler_cancellation=True,
        shutdown_timeout=STRAGGLER_TIMEOUT,
        keepalive_timeout=settings.request_timeout or 90.0,
        max_line_size=MAX_REQUEST_LINE_BYTES,
        # Go's server takes 1 MiB of headers in all; aiohttp's default is 8 KiB per header.
        max_field_size=MAX_REQUEST_LINE_BYTES,
    )


async def shut_down(
    settings: Settings, runner: web.AppRunner, listener: asyncio.Server | Acceptor, lifecycle: Lifecycle
) -> None:
    """kube-apiserver's graceful termination: /readyz fails at once while everything is still
    served for --shutdown-delay-duration (load balancers take the server out meanwhile); then the
    listener closes, the connections it accepted send their requests, the open watches end
    normally (spread over --shutdown-watch-termination-grace-period), the requests in flight finish
    (within the request timeout) and the storage closes last."""
    lifecycle.initiate_shutdown()
    delay = settings.shutdown_delay_duration
    log.info("shutting down: /readyz fails from now on%s", f", serving {delay:g}s more" if delay else "")
    await asyncio.sleep(delay)
    listener.close()
    lifecycle.listener_closed()
    await lifecycle.arrivals_done()
    ended = await lifecycle.end_watches(settings.shutdown_watch_termination_grace_period)
    log.info("stopped listening; ended %d watch(es); %d request(s) in flight", ended, lifecycle.in_flight)
    try:
        async with asyncio.timeout(settings.request_timeout or DEFAULT_SHUTDOWN_TIMEOUT):
            await lifecycle.drained()
    except TimeoutError:
        log.warning("%d request(s) still in flight; cancelling them", lifecycle.in_flight)
    lifecycle.closed = True
    await runner.cleanup()
    log.info("shut down")


class Signals:
    """SIGINT and SIGTERM: the first starts the graceful shutdown; a second ends the process at
    once with status 1, as upstream's signal handler does. A worker also shuts down when its
    `lifeline` (the read end of a pipe its supervisor holds open) ends: the supervisor is gone."""

    def __init__(self, lifeline: int | None = None) -> None:
        self._first = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self._on_signal, signum)
        if lifeline is not None:
            loop.add_reader(lifeline, self._on_orphaned, loop, lifeline)

    def _on_orphaned(self, loop: asyncio.AbstractEventLoop, lifeline: int) -> None:
        loop.remove_reader(lifeline)
        log.warning("the supervisor is gone: shutting down")
        self._first.set()

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self._first.is_set():
            log.warning("second %s: exiting now", name)
            os._exit(1)
        log.info("received %s", name)
        self._first.set()

    async def received(self) -> None:
        await self._first.wait()

    @property
    def stopping(self) -> bool:
        return self._first.is_set()


def run(settings: Settings, kinds: Sequence[ResourceKind] = KINDS) -> None:
    """`serve` in a fresh event loop; an interrupt before the signal handlers are set ends quietly.
    StartError: why the server could not start."""
    with suppress(KeyboardInterrupt):
        eventloop.run(serve(settings, kinds))
