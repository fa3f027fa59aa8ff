"""The scale curve (issue 24): the same loads at growing numbers of stored Events, on coreio on etcd,
kube-apiserver on the same etcd and coreio on SQLite, so that the cost's growth shows, not only its
level at the benchmark's 100,000:

    .venv/bin/python -m bench.scale                                 # 100,000 then 1,000,000 Events
    .venv/bin/python -m bench.scale --events 10000,100000 --duration 5

At each count, every server is first topped up to it: wrk's create script at 64 connections (the
benchmark's Event, named by the script) into the namespace `scale`, until the server lists at least
that many. Then, with the servers idle before each wrk run, as in the benchmark: GET one Event at 1
and 16 connections, the first page of 500 of the namespace holding them all at 16, named creates at
16 (into another namespace); and each server restarted: its time to /readyz 200, then, once idle,
the proportional set size of its processes against the stored JSON. The stored JSON is the first
page's compact JSON per Event times the count (the bench's Events are alike to within a few bytes;
listing a million each time would take longer than the rest). Unlike the benchmark's memory row, no
unpaged LIST comes before it: a million Events is 1.5 GB of one answer.

etcd runs with an 8 GiB quota (two servers' million Events are over its default 2 GiB) and is
compacted by the API servers alone, as a cluster's is (bench.__main__ keeps the tests' etcd, which
also compacts itself to 1,000 revisions back every 5 minutes). A run to a
million took 59 minutes on 2 cores (2026-11-28), most of it creating the Events. The table goes to
stdout and `--out` (default bench/results/scale-<time>/).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench import client, phases, wrk
from bench.events import body_template
from bench.options import RESULTS, Options
from bench.options import parse as parse_options
from bench.processes import Stack, Target, restart, rss_bytes, settle, start_stack, stop_on_signals, tree
from bench.report import CREATE, GET, LIST_PAGE, Row, figures_table, to_json

SCALE_NAMESPACE = "scale"
QUOTA = f"--quota-backend-bytes={8 * 2**30}"
# etcd compacted as a cluster's is: by the API servers, each every 5 minutes to the revision it saw
# 5 minutes before, not by etcd itself to 1,000 revisions back every 5 minutes (the tests' etcd):
# at the top-ups' 1,500-3,000 writes a second that is half a second of history, and a watch cache
# that lagged that much at the compaction listed its up to a million Events again.
NO_AUTO_COMPACTION = "--auto-compaction-retention=0"
# wrk's top-up runs: at most this long each, and at least this long (wrk counts whole seconds).
TOP_UP_SECONDS = (2.0, 120.0)
TOP_UP_CONNECTIONS = 64
PROBE_SECONDS = 5.0


@dataclass(frozen=True)
class ScaleOptions:
    counts: tuple[int, ...]
    duration: float
    out: Path

    def loads(self, connections: str) -> Options:
        """The benchmark's options for phases.load: wrk runs of `duration` at `connections`."""
        return parse_options(["--duration", str(self.duration), "--connections", connections])


def top_up_seconds(missing: int, rate: float | None) -> float:
    """How long wrk's next top-up run should last to create a little under `missing` Events at
    `rate`/s (the next run makes up the rest); a first run, its rate not known yet, is short."""
    low, high = TOP_UP_SECONDS
    if rate is None:
        return PROBE_SECONDS
    return min(high, max(low, 0.95 * missing / max(rate, 1.0)))


def top_up(target: Target, count: int, template: Path) -> int:
    """Creates Events in SCALE_NAMESPACE until `target` stores at least `count`; how many it holds."""
    stored, run = asyncio.run(phases.stored_count(target)), secrets.token_hex(3)
    rate: float | None = None
    began = time.monotonic()
    while stored < count:
        path = target.events_path(SCALE_NAMESPACE)
        args = [path, target.token, f"s{run}-{stored}", str(template)]
        seconds = top_up_seconds(count - stored, rate)
        result = wrk.run(target.url + path, TOP_UP_CONNECTIONS, seconds, "create.lua", args)
        if result.errors:
            raise RuntimeError(f"{target.name}: {result.errors} errors creating Events")
        rate = result.rate
        stored = asyncio.run(phases.stored_count(target))
    phases.say(f"  {target.name}: {stored:,} Events stored ({time.monotonic() - began:.0f} s to top up)")
    return stored


async def json_per_event(target: Target) -> float:
    """The compact JSON of an Event of SCALE_NAMESPACE, on average over the first page."""
    async with client.session(target, 1) as http:
        page = await client.get_json(http, target.events_path(SCALE_NAMESPACE) + "?limit=500")
    items = page["items"]
    return sum(len(json.dumps(item, separators=(",", ":")).encode()) for item in items) / len(items)


def scale_page(target: Target) -> str:
    return target.url + target.events_path(SCALE_NAMESPACE) + "?limit=500"


def loads(stack: Stack, options: ScaleOptions, scratch: Path, where: str) -> list[Row]:
    """GET one Event at 1 and 16 connections, the first page of 500 and named creates at 16."""
    rows = phases.load(stack, options.loads("1,16"), GET + where, phases.one_event, phases.token_args)
    sixteen = options.loads("16")
    rows += phases.load(stack, sixteen, LIST_PAGE + where, scale_page, phases.token_args)
    create = phases.create_load(scratch, secrets.token_hex(3), "body")
    rows += phases.load(stack, sixteen, CREATE + where, *create)
    return rows


def restarts(stack: Stack, stored: dict[str, int], where: str) -> list[Row]:
    """Each server restarted on what it stores: its time to ready, then its Pss once idle."""
    ready, pss = Row("restart" + where, "ready", "s"), Row("memory" + where, "Pss", "B")
    json_size, ratio = Row("memory" + where, "json", "B"), Row("memory" + where, "Pss/json", "x")
    held = Row("memory" + where, "Events stored", "n")  # at least the count: wrk overshoots a little
    for target in stack.targets:
        column = phases.COLUMN[target.name]
        held.values[column] = float(stored[target.name])
        json_size.values[column] = stored[target.name] * asyncio.run(json_per_event(target))
        ready.values[column] = restart(target)
        settle(tree(target.pid))
        pss.values[column] = float(rss_bytes(target.pid))
        ratio.values[column] = pss.values[column] / json_size.values[column]
        phases.say(
            f"  {target.name}: ready in {ready.values[column]:.2f} s,"
            f" Pss {pss.values[column] / 2**20:,.0f} MiB ({ratio.values[column]:.2f}x the JSON)"
        )
    return [ready, held, pss, json_size, ratio]


def measure(options: ScaleOptions, scratch: Path) -> list[Row]:
    phases.say("starting etcd, kube-apiserver, coreio on etcd and coreio on SQLite")
    stack = start_stack(scratch, etcd_flags=(QUOTA, NO_AUTO_COMPACTION))
    try:
        phases.write_bodies(stack.targets, scratch)
        asyncio.run(client.ensure_namespaces(stack.kube, [SCALE_NAMESPACE]))
        phases.fill_all(stack.targets, phases.LIST_NAMESPACE, "list", 1)  # the Event GETs read
        templates = {}
        for target in stack.targets:
            templates[target.name] = scratch / f"{target.name}-scale.json"
            templates[target.name].write_text(body_template(target.group_version, SCALE_NAMESPACE))
        rows: list[Row] = []
        for count in options.counts:
            phases.say(f"{count:,} Events stored")
            stored = {t.name: top_up(t, count, templates[t.name]) for t in stack.targets}
            where = f", {count:,} Events stored"
            rows += loads(stack, options, scratch, where)
            rows += restarts(stack, stored, where)
    finally:
        stack.stop()
    return rows


def parse(argv: list[str] | None) -> ScaleOptions:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--events", default="100000,1000000", help="counts, ascending (default 100000,1000000)"
    )
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per wrk run (default 10)")
    parser.add_argument("--out", type=Path, help="results directory (default bench/results/scale-<time>/)")
    args = parser.parse_args(argv)
    counts = tuple(int(part) for part in args.events.split(","))
    if list(counts) != sorted(counts) or counts[0] < 1:
        parser.error("--events: counts must be positive and ascending")
    out = args.out or RESULTS / time.strftime("scale-%Y%m%d-%H%M%S")
    return ScaleOptions(counts, args.duration, out)


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    stop_on_signals()
    try:
        wrk.wrk_binary()
    except wrk.WrkMissing as missing:
        print(f"bench.scale: {missing}", file=sys.stderr)
        return 2
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="coreio-scale-") as scratch:
        rows = measure(options, Path(scratch))
    minutes = (time.monotonic() - began) / 60
    heading = f"## bench.scale run of {time.strftime('%Y-%m-%d %H:%M')} ({minutes:.0f} min)"
    table = "\n".join([heading, "", *figures_table(rows)]) + "\n"
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "results.md").write_text(table)
    (options.out / "results.json").write_text(to_json(rows))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
