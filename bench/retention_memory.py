"""Event retention at scale (issue 22): the operator's run over many Events in a real coreio
(SQLite, TLS), its peak memory beside a run that holds every listed Event as the operator did
before (a projection of each, then the selection), each in a process of its own.

    .venv/bin/python -m bench.retention_memory                 # 300,000 Events
    .venv/bin/python -m bench.retention_memory --events 30000  # a quick look

The Events spread over 50 namespaces with ages up to two hours; they are written into the stopped
server's data directory (tests.support.seed, as its create path makes them: about a minute for
300,000, where creating them through the API took five and a half). The policy is the chart's
default spec with a 1 h maxAge, a cap of 3,000 per namespace and no cap of deletes per run. The held
run goes first and deletes nothing; then the streaming run deletes. Peak memory is the process's
VmHWM (not ru_maxrss, which Linux carries over exec from the bench's own process), beside the
operator's limit in the chart's values.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from apiserver.cluster.connection import load_kubeconfig
from apiserver.machinery.objectmeta import format_micro_time
from apiserver.machinery.types import JSON
from apiserver.resources import EventKind
from apiserver_operator import retention
from apiserver_operator.kube import KubeClient
from apiserver_operator.spec import EventRetention
from tests.support.retention_run import chart_memory_limit_mib, peak_rss_mib
from tests.support.seed import seed
from tests.support.server import start_server

NAMESPACES = 50
POLICY = EventRetention(max_age="1h", max_per_namespace=3000, max_deletes_per_run=10**7)
EVENT_TTL = 24 * 3600  # the server's --event-ttl: no Event expires during the bench


def _event(now: datetime, index: int) -> JSON:
    namespace = f"bench-{index % NAMESPACES:02d}"
    return {
        "apiVersion": "events.core.io/v1",
        "kind": "Event",
        "metadata": {"name": f"retention-{index:07d}", "namespace": namespace},
        "eventTime": format_micro_time(now - timedelta(seconds=(index * 7919) % 7200)),
        "reportingController": "example.com/bench",
        "reportingInstance": "bench-1",
        "action": "Sync",
        "reason": "Synced",
        "type": "Warning" if index % 4 == 1 else "Normal",
        "regarding": {"kind": "Pod", "namespace": namespace, "name": "web-0", "apiVersion": "v1"},
        "note": "x" * 300,
    }


async def _held(client: KubeClient) -> JSON:
    """The operator's run before issue 22: every listed Event projected and held, then selected."""
    limits, now, entries, examined = retention._Limits.of(POLICY), datetime.now(UTC), [], 0
    async for page in client.list_pages(retention.EVENTS_PATH, {"limit": str(retention.PAGE_SIZE)}):
        items = page.get("items") or []
        examined += len(items)
        entries += [e for e in (retention._project(i, limits, now) for i in items) if e is not None]
    victims = retention._select(entries, limits, now)
    return {"examined": examined, "selected": len(victims)}


async def _child(mode: str, kubeconfig: Path) -> None:
    client = KubeClient(load_kubeconfig(kubeconfig))
    started = time.monotonic()
    try:
        if mode == "held":
            result = await _held(client)
        else:
            report = await retention.collect_events(client, POLICY)
            result = {"examined": report.examined, "selected": report.deleted + report.skipped}
    finally:
        await client.close()
    result["seconds"] = round(time.monotonic() - started, 1)
    result["peak_mib"] = round(peak_rss_mib(), 1)
    print(json.dumps(result))


def _measure(mode: str, kubeconfig: Path) -> JSON:
    argv = [sys.executable, "-m", "bench.retention_memory", "--child", mode, "--kubeconfig", str(kubeconfig)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"the {mode} run failed:\n{done.stderr[-3000:]}")
    measured: JSON = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--child", choices=["held", "streaming"], help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(_child(args.child, args.kubeconfig))
        return
    data_dir = Path(tempfile.mkdtemp(prefix="coreio-retention-bench-"))
    seeded = seed(
        data_dir,
        EventKind(),
        functools.partial(_event, datetime.now(UTC)),
        args.events,
        ttl_seconds=EVENT_TTL,
    )
    print(f"seeded {args.events:,} Events in {seeded.seconds:.0f}s")
    server = start_server(data_dir, [f"--event-ttl={EVENT_TTL}"], ready_timeout=300)
    try:
        held, streaming = _measure("held", server.kubeconfig), _measure("streaming", server.kubeconfig)
    finally:
        server.stop()
    print(f"\n{'run':<34}{'examined':>10}{'selected':>10}{'seconds':>9}{'peak MiB':>10}")
    for name, row in (("held (before issue 22)", held), ("streaming (now)", streaming)):
        print(
            f"{name:<34}{row['examined']:>10,}{row['selected']:>10,}{row['seconds']:>9}{row['peak_mib']:>10}"
        )
    print(f"the chart's memory limit for the operator: {chart_memory_limit_mib():.0f} MiB")


if __name__ == "__main__":
    main()
