"""`coreio-apiserver`: flags -> Settings -> a running server."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

from aiohttp import web

from apiserver import pki, standalone
from apiserver.app import build_app
from apiserver.auth.authn import AuthenticatorChain, TokenAuthenticator, X509Authenticator
from apiserver.auth.user import UserInfo
from apiserver.config import Settings, default_data_dir
from apiserver.storage.interface import Storage

log = logging.getLogger("coreio")


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
    parser.add_argument("--event-ttl", type=int, default=3600, help="seconds an Event lives")
    parser.add_argument("--min-request-timeout", type=float, default=1800.0)
    parser.add_argument("--watch-bookmark-interval", type=float, default=60.0)
    parser.add_argument(
        "--compaction-interval", type=float, default=300.0, help="seconds between compactions (0: never)"
    )
    args = parser.parse_args(argv)
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
        event_ttl_seconds=args.event_ttl,
        min_request_timeout=args.min_request_timeout,
        watch_bookmark_interval=args.watch_bookmark_interval,
        compaction_interval=args.compaction_interval,
    )


def open_storage(settings: Settings) -> tuple[Storage, str]:
    if settings.etcd_servers:
        from apiserver.storage.etcd import EtcdStorage

        storage: Storage = EtcdStorage(
            settings.etcd_servers,
            prefix=settings.etcd_prefix,
            ca_file=settings.etcd_cafile or None,
            cert_file=settings.etcd_certfile or None,
            key_file=settings.etcd_keyfile or None,
            compaction_interval=settings.compaction_interval,
        )
        return storage, f"etcd {','.join(settings.etcd_servers)}"
    from apiserver.storage.sqlite import SQLiteStorage

    path = settings.data_dir / "coreio.db"
    return SQLiteStorage(str(path), compaction_interval=settings.compaction_interval), f"sqlite {path}"


def _token_users(path: Path) -> dict[str, UserInfo]:
    return {
        token: UserInfo(name=entry.user, uid=entry.uid, groups=entry.groups)
        for token, entry in standalone.load_token_file(path).items()
    }


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
    if settings.client_ca_file:
        client_cas.append(Path(settings.client_ca_file))
    if settings.token_auth_file:
        tokens.update(_token_users(Path(settings.token_auth_file)))
    serving = pki.ServingCertificate(cert_file, key_file, client_cas or None)
    storage, storage_desc = open_storage(settings)
    chain = AuthenticatorChain([X509Authenticator(), TokenAuthenticator(tokens)])
    app = build_app(settings, storage, chain)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=5)
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
    settings = parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(settings))
