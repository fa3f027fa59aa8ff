"""The command line: what one run measures, and how much."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Options:
    out: Path
    duration: float  # seconds per wrk run
    list_duration: float  # seconds per wrk run of a LIST
    connections: tuple[int, ...]
    list_objects: int
    rss_objects: int
    watchers: int
    watch_rates: tuple[float, ...]
    watch_duration: float
    quick: bool
    coreio_args: tuple[str, ...] = ()


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="coreio against kube-apiserver (one etcd), and coreio on SQLite, loaded with wrk.",
    )
    parser.add_argument("--quick", action="store_true", help="a short smoke run (~2 s per measurement)")
    parser.add_argument("--out", type=Path, help="results directory (default bench/results/<timestamp>/)")
    parser.add_argument("--duration", type=float, help="seconds per wrk run (default 10; quick 2)")
    parser.add_argument(
        "--list-duration", type=float, help="seconds per wrk run of a LIST (default 20; quick 2)"
    )
    parser.add_argument("--connections", default="1,16,64", help="wrk connection counts (default 1,16,64)")
    parser.add_argument("--list-objects", type=int, help="Events stored for GET/LIST (10000; quick 1000)")
    parser.add_argument("--rss-objects", type=int, help="Events stored for RSS (100000; quick 2000)")
    parser.add_argument("--watchers", type=int, default=200, help="concurrent watches (default 200)")
    parser.add_argument(
        "--watch-rates",
        default="1000,50",
        help="Events/s to write, one fan-out each (default 1000,50: the issue's rate, then a light one)",
    )
    parser.add_argument("--watch-duration", type=float, help="seconds of writing (default 10; quick 2)")
    parser.add_argument(
        "--coreio-arg",
        action="append",
        default=[],
        metavar="FLAG",
        help="a flag for both coreio servers, e.g. --coreio-arg=--watch-cache=false (repeatable)",
    )
    return parser


def parse(argv: list[str] | None = None) -> Options:
    args = parser().parse_args(argv)
    quick: bool = args.quick
    out = args.out or RESULTS / time.strftime("%Y%m%d-%H%M%S")
    return Options(
        out=out,
        duration=args.duration or (2.0 if quick else 10.0),
        list_duration=args.list_duration or (2.0 if quick else 20.0),
        connections=tuple(int(part) for part in args.connections.split(",")),
        list_objects=args.list_objects or (1000 if quick else 10_000),
        rss_objects=args.rss_objects or (2000 if quick else 100_000),
        watchers=args.watchers,
        watch_rates=tuple(float(part) for part in args.watch_rates.split(",")),
        watch_duration=args.watch_duration or (2.0 if quick else 10.0),
        quick=quick,
        coreio_args=tuple(args.coreio_arg),
    )
