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
from coreio_export.exporter import Exporter, ExportGone, Target

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
    top.add_argument("-v", "--verbose", action="store_true", help="log each batch")
    return top


async def export(args: argparse.Namespace) -> None:
    loaded, default_namespace = settings(args.kubeconfig, args.context)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with aiohttp.ClientSession() as session:
        api = Api(session, str(loaded.host).rstrip("/"), loaded, ssl_context(loaded))
        target = Target(args.namespace or default_namespace, args.name)
        await Exporter(api, target, stop).run()


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format=f"{PROG}: %(message)s",
        stream=sys.stderr,
    )
    try:
        asyncio.run(export(args))
    except ExportGone as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        sys.exit(0)
    except ExportError as exc:
        sys.exit(f"{PROG}: error: {exc}")
    sys.exit(0)
