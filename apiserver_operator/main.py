"""`coreio-operator`: runs the operator, or (`check-api`) checks that both resources answer through
the cluster's aggregation layer, as the Helm chart's test hook does."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

import kopf
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from apiserver.cluster.connection import SERVICE_ACCOUNT_DIR
from apiserver.cluster.leader import LeadershipLost
from apiserver.machinery import tasks
from apiserver_operator import handlers, metrics
from apiserver_operator.children import APISERVICE_NAMES
from apiserver_operator.kube import ApiError, KubeClient, connection_from_environment
from apiserver_operator.leader import election as lease_election
from apiserver_operator.uninstall import uninstall

log = logging.getLogger("coreio.operator")
DESCRIPTION = """\
Installs coreio into the cluster from Installation resources (operator.core.io/v1alpha1) and keeps
it running: certificates, APIServices, Event retention. It reaches the cluster with the kubeconfig
in KUBECONFIG (or ~/.kube/config) or, in a pod, with its service account."""


@dataclass
class OperatorConfig:
    namespaces: list[str] = field(default_factory=list)
    leader_election: bool = True
    lease_namespace: str = ""
    identity: str = ""
    liveness_endpoint: str = ""
    metrics_address: str = ""
    reconcile_interval: float = 30.0
    default_image: str = ""
    installation: str = "coreio"
    uninstall_wait: float = 120.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coreio-operator", description=DESCRIPTION)
    parser.add_argument(
        "command",
        nargs="?",
        choices=["run", "check-api", "uninstall"],
        default="run",
        help="run the operator (default); check-api: list both resources through the cluster;"
        " uninstall: delete the Installation --installation in the first namespace -n (default: the"
        " pod's) and wait until its children, and the exporters it deployed in each -n, are gone"
        " (the chart's pre-delete hook)",
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace (default)")
    scope.add_argument(
        "-n", "--namespace", action="append", default=[], help="watch only this namespace (repeatable)"
    )
    parser.add_argument(
        "--leader-election-namespace",
        default="",
        help="namespace of the Lease `coreio-operator` that elects one active replica"
        " (default: the pod's namespace, else `default`)",
    )
    parser.add_argument(
        "--no-leader-election", action="store_true", help="act at once, without a Lease (a single replica)"
    )
    parser.add_argument("--identity", default="", help="leader identity (default: $POD_NAME, else host-pid)")
    parser.add_argument(
        "--liveness-endpoint",
        default="",
        help="serve a liveness and readiness probe, e.g. http://0.0.0.0:8080/healthz",
    )
    parser.add_argument(
        "--metrics-address",
        default="",
        help="serve Prometheus metrics at host:port/metrics (default: off)",
    )
    parser.add_argument(
        "--reconcile-interval",
        type=float,
        default=30.0,
        help="seconds between reconciliations of each Installation (drift, certificates, Event GC)"
        " (default: 30)",
    )
    parser.add_argument(
        "--default-image",
        default="",
        help="the image of an Installation whose spec names none (the chart passes the operator's own)",
    )
    parser.add_argument(
        "--installation", default="coreio", help="uninstall: the Installation (default: coreio)"
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=120.0,
        help="uninstall: seconds to wait for the operator before removing the children itself (default: 120)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def _pod_namespace() -> str:
    """The namespace of the pod this runs in (its service account's), else `default`."""
    try:
        return (SERVICE_ACCOUNT_DIR / "namespace").read_text().strip() or "default"
    except OSError:
        return "default"


def parse_args(argv: list[str] | None) -> tuple[str, OperatorConfig, bool]:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.reconcile_interval <= 0:
        parser.error("--reconcile-interval must be positive")
    if args.wait <= 0:
        parser.error("--wait must be positive")
    config = OperatorConfig(
        namespaces=list(args.namespace),
        leader_election=not args.no_leader_election,
        lease_namespace=args.leader_election_namespace or _pod_namespace(),
        identity=args.identity or os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}",
        liveness_endpoint=args.liveness_endpoint,
        metrics_address=args.metrics_address,
        reconcile_interval=args.reconcile_interval,
        default_image=args.default_image,
        installation=args.installation,
        uninstall_wait=args.wait,
    )
    return str(args.command), config, bool(args.verbose)


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


def _healthy() -> str:
    return ""


async def _serve_http(
    config: OperatorConfig, unhealthy: Callable[[], str] = _healthy
) -> web.AppRunner | None:
    """/metrics at --metrics-address and /healthz at --liveness-endpoint. Health is served from
    the start, so that a replica waiting for the Lease passes its probes too; it answers 500 with
    the reason `unhealthy` gives, so that the kubelet restarts a stuck replica."""
    sites: list[tuple[str, int]] = []
    app = web.Application()
    if config.metrics_address:

        async def serve_metrics(_request: web.Request) -> web.Response:
            return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

        app.router.add_get("/metrics", serve_metrics)
        sites.append(_host_port(config.metrics_address))
    if config.liveness_endpoint:
        url = urllib.parse.urlsplit(config.liveness_endpoint)

        async def serve_health(_request: web.Request) -> web.Response:
            why = unhealthy()
            return web.Response(status=500 if why else 200, text=why or "ok")

        app.router.add_get(url.path or "/healthz", serve_health)
        sites.append((url.hostname or "0.0.0.0", url.port or 8080))
    if not sites:
        return None
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    for host, port in dict.fromkeys(sites):
        await web.TCPSite(runner, host, port).start()
    return runner


async def _kopf(config: OperatorConfig, client: KubeClient, stop: asyncio.Event) -> None:
    registry = kopf.OperatorRegistry()
    handlers.register(
        registry,
        handlers.HandlerConfig(
            reconcile_interval=config.reconcile_interval, namespaces=tuple(config.namespaces)
        ),
    )
    await kopf.operator(
        registry=registry,
        clusterwide=not config.namespaces,
        namespaces=config.namespaces,
        standalone=True,
        # kopf's own default asks getpass for the user name, which fails for a uid without an
        # /etc/passwd entry (a pod's runAsUser): give it ours.
        identity=config.identity,  # type: ignore[arg-type]  # kopf's Identity NewType is not exported
        memo=kopf.Memo(client=client, default_image=config.default_image),
        stop_flag=stop,
    )


async def run(config: OperatorConfig) -> None:
    client = KubeClient(connection_from_environment())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    election = lease_election(client, config.lease_namespace, config.identity)
    runner = await _serve_http(config, election.unhealthy if config.leader_election else _healthy)
    try:
        if config.leader_election:
            elected = asyncio.create_task(election.run(lambda: _kopf(config, client, stop)))
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({elected, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stop.set()
            if election.leading:
                await tasks.finish(elected)  # kopf ends on `stop`, then the Lease is released
            else:
                await tasks.stop(elected)  # still waiting for the Lease: nothing to finish
        else:
            await _kopf(config, client, stop)
    finally:
        if runner is not None:
            await runner.cleanup()
        await client.close()


async def check_api() -> int:
    """Lists both resources through the cluster; 0 when both answer."""
    client = KubeClient(connection_from_environment())
    failures = 0
    try:
        for name in APISERVICE_NAMES:
            group = name.removeprefix("v1.")
            plural = "rolebindings" if group.startswith("rbac.") else "events"
            try:
                page = await client.get(f"/apis/{group}/v1/{plural}", {"limit": "1"})
                version = page.get("metadata", {}).get("resourceVersion")
                print(f"{plural}.{group}: ok (resourceVersion {version})")
            except (ApiError, OSError, TimeoutError) as exc:
                failures += 1
                print(f"{plural}.{group}: {exc}", file=sys.stderr)
    finally:
        await client.close()
    return 1 if failures else 0


async def run_uninstall(config: OperatorConfig) -> int:
    """The chart's pre-delete hook: see `uninstall`."""
    client = KubeClient(connection_from_environment())
    namespaces = config.namespaces or [_pod_namespace()]
    try:
        lease = lease_election(client, config.lease_namespace, "coreio-uninstall")
        steps = await uninstall(client, namespaces, config.installation, config.uninstall_wait, lease)
        for step in steps:
            print(step, flush=True)
    finally:
        await client.close()
    return 0


def main(argv: list[str] | None = None) -> None:
    command, config, verbose = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        if command == "check-api":
            raise SystemExit(asyncio.run(check_api()))
        if command == "uninstall":
            raise SystemExit(asyncio.run(run_uninstall(config)))
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run(config))
    except (RuntimeError, ValueError, OSError) as exc:
        sys.stderr.write(f"coreio-operator: {exc}\n")
        raise SystemExit(1) from None
    except LeadershipLost as exc:
        sys.stderr.write(f"coreio-operator: {exc}; exiting so that a fresh start waits for the Lease\n")
        raise SystemExit(1) from None
