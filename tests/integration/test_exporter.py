"""coreio-export as its users run it, on SQLite and on etcd: it sends what its EventExport selects
to the sink, in revision order per namespace, and loses nothing acknowledged when it is killed
(SIGKILL, five times, under 500 Events a second for a minute): it resumes at the position its
status holds, so only the batch in flight at a kill may arrive twice."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import Api
from tests.support.exporter import (
    EXPORTS,
    GROUP_VERSION,
    ExporterProcess,
    delivery,
    export,
    read_lines,
    write_events,
)
from tests.support.server import BACKENDS, ServerProcess, backend_args, free_port
from tests.support.waiting import wait_until

KILLS = 5
BATCH = 100


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    process = ServerProcess(
        tmp_path_factory.mktemp(f"exporter-{request.param}"),
        free_port(),
        [*backend_args(request, request.param), f"--runtime-config={GROUP_VERSION}=true"],
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def admin(server: ServerProcess) -> Api:
    return Api(server)


def namespace() -> str:
    return f"ns-{uuid.uuid4().hex[:6]}"


def status(admin: Api, ns: str, name: str) -> dict[str, Any]:
    answer = admin.get(f"{EXPORTS}/namespaces/{ns}/eventexports/{name}")
    assert answer.status == 200, answer.body
    return dict(answer.json.get("status") or {})


def test_killed_five_times_under_load_it_loses_nothing(
    server: ServerProcess, admin: Api, tmp_path: Path
) -> None:
    a, b, elsewhere = namespace(), namespace(), namespace()
    sink = tmp_path / "events.jsonl"
    body = export(
        "all", {"jsonLines": {"path": str(sink)}}, namespaces=[a, b], drop=[{"reason": "^Reason3$"}]
    )
    assert admin.post(f"{EXPORTS}/namespaces/{a}/eventexports", body).status == 201
    exporter = ExporterProcess(server, a, "all", tmp_path / "exporter.log")
    exporter.start()
    wait_until(lambda: status(admin, a, "all").get("position"), timeout=30, message="the first position")
    kills: list[float] = []

    def kill_every_ten_seconds(elapsed: float) -> None:
        if len(kills) < KILLS and elapsed >= 5 + 10 * len(kills):
            exporter.kill()
            kills.append(elapsed)
            exporter.start()

    written = asyncio.run(
        write_events(
            server, [a, b, elsewhere], rate=500, seconds=60, prefix="k", during=kill_every_ten_seconds
        )
    )
    assert written.refused == 0 and len(kills) == KILLS
    newest = max(revision for _, _, revision, _ in written.events)
    wait_until(
        lambda: int(status(admin, a, "all").get("position") or 0) >= newest,
        timeout=90,
        interval=0.5,
        message=lambda: f"the position to reach {newest}: {status(admin, a, 'all')}",
    )
    assert exporter.stop() == 0

    got = delivery(read_lines(sink))
    sent = {
        (r["event"]["metadata"]["namespace"], r["event"]["metadata"]["name"], int(r["resourceVersion"]))
        for r in got.first.values()
    }
    expected = {
        (ns, name, revision)
        for ns, name, revision, _ in written.events
        if ns != elsewhere and int(name.rsplit("-", 1)[1]) % 7 != 3
    }
    print(
        f"\n{len(written.events)} Events written, {len(expected)} selected, {len(sent)} delivered, "
        f"{got.duplicates} duplicates across {KILLS} kills"
    )
    assert expected - sent == set(), f"{len(expected - sent)} acknowledged Events never delivered"
    assert sent - expected == set(), "Events the export does not select were delivered"
    assert got.out_of_order == []
    assert got.duplicates <= KILLS * BATCH
    final = status(admin, a, "all")
    assert final["counts"]["sent"] >= len(expected)
    assert {c["type"]: c["status"] for c in final["conditions"]} == {"Ready": "True", "Lagging": "False"}
