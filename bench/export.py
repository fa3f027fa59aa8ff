"""coreio-export's figures (issue 25), on each storage and for each sink, into the real receiving
software where the tests run one (bench/sinks.py: the OpenTelemetry Collector over OTLP/gRPC, a
Kafka broker, Loki):

    .venv/bin/python -m bench.export                 # both storages, every sink (about 25 minutes)
    .venv/bin/python -m bench.export --storage sqlite --sinks jsonLines,kafka --backlog 50000

- catch-up: `--backlog` Events written while the exporter is stopped, then the records a second it
  delivers from its start until its position reaches the newest revision (its start included);
- latency: Events written at `--rate` a second for `--seconds` while it runs; each Event's receipt
  at the receiving end (bench/sinks.py says how each is seen) minus the writer's acknowledgement,
  p50 and p99 (batches of 100 sent after 100 ms at most);
- a kill: the same load again, the exporter killed with SIGKILL halfway and started again at once;
  acknowledged Events never delivered (lost) and delivered twice (duplicated) are counted.

Beside coreio-export run the other exporters the issue names, through the same three phases, each
keeping no position (so the catch-up column says how many of the backlog it never sent, and its
kill is a restart that lists anew):
- the OpenTelemetry Collector's `k8sobjects` receiver (bench/k8sobjects.py, built from the Go module
  proxy), watching the same Events of its own namespace and sending them over OTLP/HTTP;
- kubernetes-event-exporter v1.6.1 (bench/kee.py, built from the Go module proxy at its first run;
  `--kubernetes-event-exporter PATH` runs a binary of one's own). It reads only a kube-apiserver's
  core/v1 Events: the same Events are written to the bench's own kube-apiserver (on its own etcd)
  as events.k8s.io/v1, each stamped with the time it is written (it drops an Event whose time is
  5 s old), and it posts them to the receiving process coreio-export's webhook sink meets.
`--no-alternative` leaves both out.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

from bench.k8sobjects import VERSION as K8SOBJECTS_VERSION
from bench.k8sobjects import K8sObjectsEnd
from bench.kee import VERSION as KEE_VERSION
from bench.kee import KeeEnd, ensure_binary
from bench.sinks import SINKS, harness
from bench.stats import percentile
from tests.support.api import Api, event
from tests.support.controlplane import start_control_plane
from tests.support.etcd import EtcdProcess
from tests.support.exporter import (
    EXPORTS,
    GROUP_VERSION,
    ExporterProcess,
    Written,
    delivery,
    export,
    write_events,
)
from tests.support.server import ServerProcess, start_server

NOT_RUN = "kubernetes-event-exporter: not run (--no-alternative)"
KUBE_EVENTS = "events.k8s.io/v1"
KEE = f"kubernetes-event-exporter {KEE_VERSION}"


@dataclass
class Row:
    storage: str
    sink: str
    catch_up: float  # records a second
    p50: float  # seconds
    p99: float
    lost: int
    duplicated: int
    exporter: str = "coreio-export"
    never_sent: tuple[int, int] | None = None  # of the backlog: (never sent, written); no position


def position(api: Api, ns: str) -> int:
    status = api.get(f"{EXPORTS}/namespaces/{ns}/eventexports/bench").json.get("status") or {}
    return int(status.get("position") or 0)


def newest(api: Api) -> int:
    return int(api.get("/apis/events.core.io/v1/events?limit=1").json["metadata"]["resourceVersion"])


def wait_position(api: Api, ns: str, target: int, limit: float = 300.0) -> float:
    began = time.monotonic()
    while position(api, ns) < target:
        if time.monotonic() - began > limit:
            raise SystemExit(f"the exporter did not reach {target} within {limit:.0f}s")
        time.sleep(0.05)
    return time.monotonic()


def measure(server: ServerProcess, storage: str, sink: str, args: argparse.Namespace, scratch: Path) -> Row:
    api = Api(server)
    ns = f"bench-{sink.lower()}-{time.monotonic_ns() % 100000}"
    end = harness(sink, scratch / f"{storage}-{sink}")
    exporter = ExporterProcess(server, ns, "bench", scratch / f"{storage}-{sink}.log")
    try:
        body = export("bench", end.target(), batch={"maxEvents": 100, "maxWait": args.max_wait})
        created = api.post(f"{EXPORTS}/namespaces/{ns}/eventexports", body)
        if created.status != 201:
            raise SystemExit(f"the EventExport was refused: {created.json.get('message')}")
        end.start()
        exporter.start()
        wait_position(api, ns, 1)
        exporter.stop()
        load = asyncio.run(
            write_events(server, [ns], rate=args.backlog, seconds=1, prefix="b", connections=16)
        )
        began = time.monotonic()
        exporter.start()
        catch_up = load_rate(len(load.events), began, wait_position(api, ns, newest(api)))
        paced = asyncio.run(write_events(server, [ns], rate=args.rate, seconds=args.seconds, prefix="p"))
        wait_position(api, ns, newest(api))
        received = end.received_at()
        latencies = [received[n] - t for n, t in paced.acknowledged_at.items() if n in received]
        killed = asyncio.run(
            write_events(
                server,
                [ns],
                rate=args.rate,
                seconds=args.seconds,
                prefix="k",
                during=kill_once(exporter.kill, exporter.start, args.seconds / 2),
            )
        )
        wait_position(api, ns, newest(api))
        exporter.stop()
        time.sleep(0.2)  # the receiving end's last poll
        records = end.records()
        got = delivery([r for r in records if r["event"]["metadata"]["name"].startswith("k-")])
        acked = names(killed)
        lost = len(acked - {r["event"]["metadata"]["name"] for r in got.first.values()})
        return Row(
            storage,
            sink,
            catch_up,
            percentile(latencies, 0.5),
            percentile(latencies, 0.99),
            lost,
            got.duplicates,
        )
    finally:
        exporter.stop()
        end.stop()


def load_rate(count: int, began: float, ended: float) -> float:
    return count / (ended - began)


def kill_once(kill: Callable[[], None], start: Callable[[], None], at: float) -> Callable[[float], None]:
    """`kill` (SIGKILL), then `start` at once, the first time `at` seconds have passed."""
    done: list[float] = []

    def during(elapsed: float) -> None:
        if not done and elapsed >= at:
            kill()
            start()
            done.append(elapsed)

    return during


def names(written: Written) -> set[str]:
    return {name for _, name, _, _ in written.events}


class Receiving(Protocol):
    def received_at(self) -> dict[str, float]: ...


def settle(end: Receiving, wanted: set[str], quiet: float = 3.0, limit: float = 60.0) -> None:
    """Until `end` received every name of `wanted`, or nothing new for `quiet` seconds."""
    began = last_change = time.monotonic()
    count = -1
    while not wanted <= set(end.received_at()) and time.monotonic() - began < limit:
        if (now := len(end.received_at())) != count:
            count, last_change = now, time.monotonic()
        elif time.monotonic() - last_change > quiet:
            return
        time.sleep(0.05)


def paced_latencies(end: Receiving, paced: Written, exporter: str, log: Path) -> list[float]:
    """Once `end` has settled, each paced Event's receipt minus its acknowledgement; what never
    arrived is printed, and none arriving ends the run."""
    settle(end, names(paced))
    received = end.received_at()
    latencies = [received[n] - t for n, t in paced.acknowledged_at.items() if n in received]
    if missed := len(names(paced) - set(received)):
        print(f"{exporter}: {missed} of the paced Events never sent")
    if not latencies:
        raise SystemExit(f"{exporter} sent none of the paced Events: {log}")
    return latencies


def positionless_row(
    where: tuple[str, str, str],
    latencies: list[float],
    killed: Written,
    sent: list[str],
    never: tuple[int, int],
) -> Row:
    """The row of an exporter that keeps no position: `where` its (exporter, storage, sink), `sent`
    the names it delivered of the `killed` phase's Events, once per delivery, and `never` how many
    of the backlog it never sent (of how many)."""
    exporter, storage, sink = where
    lost, duplicated = len(names(killed) - set(sent)), len(sent) - len(set(sent))
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    return Row(storage, sink, 0.0, p50, p99, lost, duplicated, exporter=exporter, never_sent=never)


def measure_k8sobjects(server: ServerProcess, storage: str, args: argparse.Namespace, scratch: Path) -> Row:
    """The same three phases for the collector's k8sobjects receiver, into its OTLP/HTTP receiver."""
    ns = f"bench-k8sobjects-{time.monotonic_ns() % 100000}"
    end = K8sObjectsEnd(server, ns, scratch / f"{storage}-k8sobjects")
    try:
        end.start()
        end.stop()
        backlog = asyncio.run(
            write_events(server, [ns], rate=args.backlog, seconds=1, prefix="b", connections=16)
        )
        end.start()
        settle(end, names(backlog))
        never_sent = len(names(backlog) - set(end.received_at()))
        paced = asyncio.run(write_events(server, [ns], rate=args.rate, seconds=args.seconds, prefix="p"))
        latencies = paced_latencies(end, paced, f"otelcol k8sobjects ({storage})", end.log)
        restart = kill_once(end.kill, lambda: end.start(wait=False), args.seconds / 2)
        killed = asyncio.run(
            write_events(server, [ns], rate=args.rate, seconds=args.seconds, prefix="k", during=restart)
        )
        settle(end, names(killed))
        added = [name for name in end.added() if name.startswith("k-")]
        where = (f"otelcol k8sobjects {K8SOBJECTS_VERSION}", storage, "otlpHttp")
        return positionless_row(where, latencies, killed, added, (never_sent, len(names(backlog))))
    finally:
        end.close()


def measure_kee(binary: Path, args: argparse.Namespace, scratch: Path) -> Row:
    """The same three phases for kubernetes-event-exporter on a kube-apiserver of its own, into its
    webhook receiver."""
    plane = start_control_plane(scratch / "kee-plane")
    ns = "bench-kee"
    end = KeeEnd(binary, plane.kubeconfig, ns, scratch / "kee")
    write = partial(write_events, plane, [ns], group_version=KUBE_EVENTS, stamped=True)
    try:
        plane.run("create", "namespace", ns)
        end.start()
        asyncio.run(write(rate=1, seconds=1, prefix="probe"))
        end.wait_sent("probe-0")
        end.stop()
        backlog = asyncio.run(write(rate=args.backlog, seconds=1, prefix="b", connections=16))
        end.start()
        # Sure to be sent (written after its start): once it is, what it sends of the backlog is
        # under way, and a pause of its sends is no longer its start.
        asyncio.run(write(rate=1, seconds=1, prefix="started"))
        try:
            end.wait_sent("started-0", limit=120)
        except AssertionError:
            print("kubernetes-event-exporter sent nothing written after its start within 120 s")
        settle(end, names(backlog))
        never_sent = len(names(backlog) - set(end.received_at()))
        paced = asyncio.run(write(rate=args.rate, seconds=args.seconds, prefix="p"))
        latencies = paced_latencies(end, paced, "kubernetes-event-exporter", end.log)
        restart = kill_once(end.kill, end.start, args.seconds / 2)
        killed = asyncio.run(write(rate=args.rate, seconds=args.seconds, prefix="k", during=restart))
        settle(end, names(killed))
        sent = [name for name in end.receiver.names() if name.startswith("k-")]
        where = (KEE, "kube-apiserver", "webhook")
        return positionless_row(where, latencies, killed, sent, (never_sent, len(names(backlog))))
    finally:
        end.close()
        plane.stop()


def run(storage: str, args: argparse.Namespace, scratch: Path) -> list[Row]:
    flags = [f"--runtime-config={GROUP_VERSION}=true"]
    etcd = EtcdProcess() if storage == "etcd" else None
    if etcd is not None:
        flags += ["--etcd-servers", etcd.start()]
    server = start_server(scratch / storage, flags)
    try:
        Api(server).post("/apis/events.core.io/v1/namespaces/warm/events", event("warm", "warm"))
        rows = [measure(server, storage, sink, args, scratch) for sink in args.sinks.split(",")]
        if args.alternative:
            rows.append(measure_k8sobjects(server, storage, args, scratch))
        return rows
    finally:
        server.stop()
        if etcd is not None:
            etcd.stop()


def milliseconds(seconds: float) -> str:
    """A latency to a tenth of a millisecond below 10 ms (a watch's sends are that quick)."""
    value = seconds * 1000
    return f"{value:.1f} ms" if value < 10 else f"{value:,.0f} ms"


def table(rows: list[Row]) -> str:
    lines = [
        "| exporter | storage | sink | catch-up (records/s) | latency p50 | latency p99 | lost across a kill "
        "| duplicated |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        catch_up = f"{r.catch_up:,.0f}"
        if r.never_sent is not None:
            catch_up = (
                f"none: {r.never_sent[0]:,} of the {r.never_sent[1]:,} written while stopped never sent"
            )
        lines.append(
            f"| {r.exporter} | {r.storage} | {r.sink} | {catch_up} | {milliseconds(r.p50)} | "
            f"{milliseconds(r.p99)} | {r.lost} | {r.duplicated} |"
        )
    if not any(r.exporter == KEE for r in rows):
        lines.append(f"| {NOT_RUN} | | | | | | | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage", choices=["sqlite", "etcd", "both"], default="both")
    parser.add_argument("--backlog", type=int, default=20_000, help="Events written while it is stopped")
    parser.add_argument("--rate", type=float, default=500.0, help="Events a second while it runs")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each paced load lasts")
    parser.add_argument("--sinks", default=",".join(SINKS), help=f"comma-separated, of {', '.join(SINKS)}")
    parser.add_argument(
        "--max-wait",
        default="100ms",
        help="how long coreio-export's batch waits for more records (the export's batch.maxWait)",
    )
    parser.add_argument(
        "--no-alternative",
        dest="alternative",
        action="store_false",
        help="leave out the collector's k8sobjects receiver and kubernetes-event-exporter (each built"
        " from Go modules at its first run)",
    )
    parser.add_argument(
        "--kubernetes-event-exporter",
        dest="kee",
        type=Path,
        help="a kubernetes-event-exporter binary of one's own to measure, rather than the one built",
    )
    args = parser.parse_args()
    storages = ["sqlite", "etcd"] if args.storage == "both" else [args.storage]
    kee = ensure_binary(args.kee) if args.alternative else None  # built before anything is timed
    with tempfile.TemporaryDirectory(prefix="coreio-bench-export-") as scratch:
        rows = [row for storage in storages for row in run(storage, args, Path(scratch))]
        if kee is not None:
            rows.append(measure_kee(kee, args, Path(scratch)))
    print(table(rows))


if __name__ == "__main__":
    main()
