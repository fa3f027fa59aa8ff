"""`coreio-export NAME [-n NAMESPACE]`: runs one EventExport's exporter until it is stopped
(SIGTERM or SIGINT: the batch in hand is sent and its position kept first) or the EventExport is
deleted. A mistake is one line on stderr and exit status 1."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

import aiohttp

from coreio_export.connection import Api, ExportError, settings, ssl_context
from coreio_export.exporter import Exporter
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
    top.add_argument("-v", "--verbose", action="store_true", help="log each batch")
    return top


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
            await Exporter(api, target, stop, metrics).run()
    finally:
        if runner is not None:
            await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = parser().parse_args(argv)
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
    except ExportError as exc:
        sys.exit(f"{PROG}: error: {exc}")
    sys.exit(0)
