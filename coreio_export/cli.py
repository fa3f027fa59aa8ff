"""`coreio-export NAME [-n NAMESPACE]`: runs one EventExport's exporter until it is stopped
(SIGTERM or SIGINT: the batch in hand is sent and its position kept first) or the EventExport is
deleted; with --leader-elect, only while it holds the export's Lease (leading.py). A mistake is one
line on stderr and exit status 1."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

import aiohttp

from apiserver.cluster.leader import LeadershipLost
from apiserver.machinery.gofmt import parse_go_duration
from coreio_export.connection import Api, ExportError, settings, ssl_context
from coreio_export.exporter import Exporter
from coreio_export.leading import Timings, run_elected
from coreio_export.metrics import ExportMetrics, serve
from coreio_export.target import ExportGone, Target

PROG = "coreio-export"


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(1, f"{PROG}: error: {message}\n")


def parser() -> Parser:
    top = Parser(prog=PROG, description="Sends the Events an EventExport selects to its sink.")
    top.add_argument("name", metavar="NAME", help="the EventExport")
    top.add_argument("-n", "--namespace", help="its namespace (default: the context's, else default)")
    top.add_argument("--kubeconfig", help="the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
    top.add_argument("--context", help="the kubeconfig context to use")
    top.add_argument(
        "--metrics-bind-address",
        default=None,
        type=_address,
        metavar="HOST:PORT",
        help="serve Prometheus metrics at /metrics there (default: not served)",
    )
    top.add_argument(
        "--leader-elect",
        action="store_true",
        help="export only while holding the Lease coreio-export-NAME in the export's namespace (a "
        "cluster's coordination.k8s.io/v1), so that of several replicas one exports at a time",
    )
    defaults = Timings()
    for flag, default, what in (
        ("lease-duration", defaults.lease, "how long a replica waits for an unrenewed Lease to expire"),
        ("renew-deadline", defaults.renew_deadline, "how long the leader tries to renew before it stops"),
        ("retry-period", defaults.retry, "the pause between two tries at the Lease"),
    ):
        top.add_argument(
            f"--leader-elect-{flag}",
            type=_duration,
            default=default,
            metavar="DURATION",
            help=f"{what} ({default:g}s)",
        )
    top.add_argument("-v", "--verbose", action="store_true", help="log each batch")
    return top


def _duration(text: str) -> float:
    try:
        return parse_go_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _address(text: str) -> str:
    _host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (a port from 1 to 65535)")
    return text


async def export(args: argparse.Namespace) -> None:
    loaded, default_namespace = settings(args.kubeconfig, args.context)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    target = Target(args.namespace or default_namespace, args.name)
    metrics = ExportMetrics(target.namespace, target.name)
    runner = await serve(metrics, args.metrics_bind_address) if args.metrics_bind_address else None
    try:
        async with aiohttp.ClientSession() as session:
            api = Api(session, str(loaded.host).rstrip("/"), loaded, ssl_context(loaded))
            exporter = Exporter(api, target, stop, metrics)
            if args.leader_elect:
                await run_elected(api, target, _timings(args), exporter.run, stop)
            else:
                await exporter.run()
    finally:
        if runner is not None:
            await runner.cleanup()


def _timings(args: argparse.Namespace) -> Timings:
    return Timings(
        args.leader_elect_lease_duration, args.leader_elect_renew_deadline, args.leader_elect_retry_period
    )


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = parser().parse_args(argv)
    if args.leader_elect and (problem := _timings(args).check()):
        parser().error(problem)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format=f"{PROG}: %(message)s",
        stream=sys.stderr,
    )
    # aiokafka logs each refused connection itself; the exporter says it once a failed batch.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    try:
        asyncio.run(export(args))
    except ExportGone as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        sys.exit(0)
    except LeadershipLost as exc:
        sys.exit(f"{PROG}: stopped exporting: {exc}")
    except ExportError as exc:
        sys.exit(f"{PROG}: error: {exc}")
    sys.exit(0)
