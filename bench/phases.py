"""Each measurement of a run, as rows of the report."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from bench import client, etcdraw, wrk
from bench.events import body_template, generated_name_template
from bench.options import Options
from bench.processes import Stack, Target, restart, rss_bytes, settle, tree
from bench.report import (
    COREIO_ETCD,
    COREIO_SQLITE,
    CREATE,
    CREATE_GENERATED,
    ETCD_RAW,
    FRESH,
    GET,
    KUBE,
    LIST_ALL,
    LIST_NS,
    LIST_PAGE,
    LISTS,
    MEMORY,
    ONE_WORKER,
    READY,
    RESTART,
    Row,
    watch_section,
)
from bench.stats import Measured
from bench.watch import fan_out

LIST_NAMESPACE = "list"
CREATE_NAMESPACE = "create"
RSS_NAMESPACE = "rss"
COLUMN = {"coreio-etcd": COREIO_ETCD, "coreio-sqlite": COREIO_SQLITE, "kube-apiserver": KUBE}


def say(message: str) -> None:
    print(message, flush=True)


def wrk_rows(section: str, connections: int) -> list[Row]:
    return [
        Row(section, metric, unit, connections)
        for metric, unit in (("rate", "/s"), ("p50", "s"), ("p99", "s"))
    ]


def record(rows: list[Row], column: str, result: wrk.WrkResult | Measured) -> None:
    rate, p50, p99 = rows
    rate.values[column], p50.values[column], p99.values[column] = result.rate, result.p50, result.p99


def load(
    stack: Stack,
    options: Options,
    section: str,
    url: Callable[[Target], str],
    args: Callable[[Target], list[str]],
    targets: list[Target] | None = None,
) -> list[Row]:
    """wrk at each connection count against every server (or `targets`), `url` and script `args`
    per server."""
    rows: list[Row] = []
    script = "create.lua" if section.startswith(CREATE) else "read.lua"
    for connections in options.connections:
        found = wrk_rows(section, connections)
        for target in targets or stack.targets:
            settle(pids(stack))
            duration = options.list_duration if section in LISTS else options.duration
            result = wrk.run(url(target), connections, duration, script, args(target))
            say(
                f"  {section} c={connections} {target.name}: {result.rate:,.0f}/s"
                f" p50 {result.p50 * 1000:.1f} ms p99 {result.p99 * 1000:.1f} ms"
                f" ({result.requests} requests, {result.errors} errors)"
            )
            record(found, COLUMN[target.name], result)
        rows += found
    return rows


def pids(stack: Stack) -> list[int]:
    return [target.pid for target in stack.targets]


def ready_rows(stack: Stack) -> list[Row]:
    row = Row(READY, FRESH, "s")
    for target in stack.targets:
        row.values[COLUMN[target.name]] = target.ready_seconds
    return [row]


def fill_all(targets: list[Target], namespace: str, prefix: str, count: int) -> None:
    for target in targets:
        asyncio.run(client.ensure_namespaces(target, [namespace]))
        began = time.monotonic()
        asyncio.run(client.fill(target, namespace, prefix, count))
        say(f"  {target.name}: {count} Events stored in {namespace} in {time.monotonic() - began:.0f} s")


def token_args(target: Target) -> list[str]:
    return [target.token]


def one_event(target: Target) -> str:
    return target.url + target.events_path(LIST_NAMESPACE) + "/list-0"


def all_events(target: Target) -> str:
    return target.url + target.events_path(None)


def namespace_events(target: Target) -> str:
    return target.url + target.events_path(LIST_NAMESPACE)


def first_page(target: Target) -> str:
    return namespace_events(target) + "?limit=500"


def reads(stack: Stack, options: Options) -> list[Row]:
    """GET of one Event and the three LISTs, with `list_objects` Events stored."""
    say(f"filling {options.list_objects} Events per server")
    fill_all(stack.targets, LIST_NAMESPACE, "list", options.list_objects)
    rows = load(stack, options, GET, one_event, token_args)
    rows += load(stack, options, LIST_ALL, all_events, token_args)
    rows += load(stack, options, LIST_NS, namespace_events, token_args)
    rows += load(stack, options, LIST_PAGE, first_page, token_args)
    return rows


def create_load(
    scratch: Path, run: str, body: str
) -> tuple[Callable[[Target], str], Callable[[Target], list[str]]]:
    """wrk's create script's URL and arguments per server, with the body `body` (`body`: named
    Events; `generated`: generateName) that `write_bodies` wrote."""

    def args(target: Target) -> list[str]:
        path = target.events_path(CREATE_NAMESPACE)
        # wrk's connection count is not known here; a run id and the thread id keep names unique.
        prefix = f"c{run}-{secrets.token_hex(3)}"
        return [path, target.token, prefix, str(scratch / f"{target.name}-{body}.json")]

    def url(target: Target) -> str:
        return target.url + target.events_path(CREATE_NAMESPACE)

    return url, args


def write_bodies(targets: list[Target], scratch: Path) -> None:
    for target in targets:
        asyncio.run(client.ensure_namespaces(target, [CREATE_NAMESPACE]))
        template = scratch / f"{target.name}-body.json"
        template.write_text(body_template(target.group_version, CREATE_NAMESPACE))
        generated = scratch / f"{target.name}-generated.json"
        generated.write_text(generated_name_template(target.group_version, CREATE_NAMESPACE))


def creates(stack: Stack, options: Options, scratch: Path) -> list[Row]:
    """wrk's create script against each server; aetcd's create-if-absent transactions beside."""
    write_bodies(stack.targets, scratch)
    run = secrets.token_hex(3)
    rows = load(stack, options, CREATE, *create_load(scratch, run, "body"))
    # The same Events named by the server (generateName): a name made, and retried if taken.
    generated_rows = load(stack, options, CREATE_GENERATED, *create_load(scratch, run, "generated"))
    for row in rows:
        if row.metric == "rate" and row.connections is not None:
            raw = etcdraw.raw_creates(stack.etcd.client_url, row.connections, options.duration)
            say(f"  raw etcd c={row.connections}: {raw.rate:,.0f}/s")
            record([r for r in rows if r.connections == row.connections], ETCD_RAW, raw)
    return rows + generated_rows


def kube_figure(rows: list[Row], section: str, metric: str, connections: int | None) -> float | None:
    """kube-apiserver's figure in `rows` for that measurement, if it was measured."""
    for row in rows:
        if (row.section, row.metric, row.connections) == (section, metric, connections):
            return row.values.get(KUBE)
    return None


def one_worker(stack: Stack, options: Options, scratch: Path, measured: list[Row]) -> list[Row]:
    """GETs and creates with each coreio restarted on --workers=1, then restarted as it was;
    kube-apiserver's figures are copied from the same loads in `measured`."""
    coreios = [stack.coreio_etcd, stack.coreio_sqlite]
    commands = {target.name: target.command for target in coreios}
    for target in coreios:
        target.command = [*target.command, "--workers=1"]
        restart(target)
    try:
        rows = load(stack, options, GET + ONE_WORKER, one_event, token_args, coreios)
        rows += load(
            stack, options, CREATE + ONE_WORKER, *create_load(scratch, secrets.token_hex(3), "body"), coreios
        )
    finally:
        for target in coreios:
            target.command = commands[target.name]
            restart(target)
    for row in rows:
        kube = kube_figure(measured, row.section.removesuffix(ONE_WORKER), row.metric, row.connections)
        if kube is not None:
            row.values[KUBE] = kube
    return rows


def watches(stack: Stack, options: Options, rate: float) -> list[Row]:
    """The fan-out: watchers in their own process while this one writes at `rate`."""
    section = watch_section(rate)
    rows = [
        Row(section, metric, unit)
        for metric, unit in (("written", "/s"), ("p50", "s"), ("p99", "s"), ("lost", "n"))
    ]
    for target in stack.targets:
        settle(pids(stack))
        got = fan_out(target, options.watchers, rate, options.watch_duration)
        say(
            f"  {target.name}: {got.rate:,.0f} Events/s to {options.watchers} watchers,"
            f" p50 {got.p50 * 1000:.1f} ms p99 {got.p99 * 1000:.1f} ms, {got.lost} lost,"
            f" {got.write_errors} errors;"
            f" CPU while writing: {', '.join(f'{k} {v:.0%}' for k, v in got.cpu.items())}"
        )
        for row, value in zip(rows, (got.rate, got.p50, got.p99, float(got.lost)), strict=True):
            row.values[COLUMN[target.name]] = value
    return rows


async def stored_count(target: Target) -> int:
    async with client.session(target, 1) as http:
        page = await client.get_json(http, target.events_path(None) + "?limit=1")
        return len(page["items"]) + int(page["metadata"].get("remainingItemCount", 0))


def memory(stack: Stack, options: Options) -> list[Row]:
    """Each server's RSS with `rss_objects` Events stored (after a LIST warm-up), the stored JSON,
    and its time to ready when restarted on that data. (kube-apiserver's RSS is for comparison.)"""
    stored, rss, size = Row(MEMORY, "Events stored", "n"), Row(MEMORY, "rss", "B"), Row(MEMORY, "json", "B")
    ratio, restart_row = Row(MEMORY, "rss/json", "x"), Row(READY, RESTART, "s")
    for target in stack.targets:
        missing = options.rss_objects - asyncio.run(stored_count(target))
        if missing > 0:
            fill_all([target], RSS_NAMESPACE, "rss", missing)
        column = COLUMN[target.name]
        count, size.values[column] = asyncio.run(client.stored_json_size(target))
        stored.values[column] = float(count)
        # A fresh process (its start timed): RSS is then what the stored Events and one LIST of
        # them cost, not the peak of earlier phases (Python seldom gives freed memory back).
        restart_row.values[column] = restart(target)
        asyncio.run(client.warm_up(target))
        # Idle first, as before each wrk run: what a server does in the background after a start
        # (coreio's caches pack their values) is done by then, for every server alike.
        settle(tree(target.pid))
        rss.values[column] = float(rss_bytes(target.pid))
        ratio.values[column] = rss.values[column] / size.values[column]
        say(
            f"  {target.name}: {count} Events, RSS {rss.values[column] / 2**20:.0f} MiB, "
            f"JSON {size.values[column] / 2**20:.0f} MiB"
        )
    return [stored, rss, size, ratio, restart_row]
