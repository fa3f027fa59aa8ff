"""coreio-export's life as its users steer it, on SQLite and on etcd: a change of the spec is taken
up without a restart and from the position reached; SIGTERM while its sink keeps failing stops it
at once, its position still before what was not delivered; a deleted export ends it (exit 0); a
mistake is one line and exit status 1."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import Api, event
from tests.support.exporter import EXPORTS, ExporterProcess, export, exports_server, read_lines, write_events
from tests.support.server import BACKENDS, ServerProcess, free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.tools
EVENTS = "/apis/events.core.io/v1"


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    yield from exports_server(request, tmp_path_factory, "exporter-control")


@pytest.fixture(scope="module")
def admin(server: ServerProcess) -> Api:
    return Api(server)


def status(admin: Api, ns: str, name: str) -> dict[str, Any]:
    return dict(admin.get(f"{EXPORTS}/namespaces/{ns}/eventexports/{name}").json.get("status") or {})


def started(server: ServerProcess, admin: Api, ns: str, name: str, log: Path) -> ExporterProcess:
    exporter = ExporterProcess(server, ns, name, log)
    exporter.start()
    wait_until(lambda: status(admin, ns, name).get("position"), timeout=30, message="the first position")
    return exporter


def test_a_spec_change_is_taken_up_from_the_position_reached(
    server: ServerProcess, admin: Api, tmp_path: Path
) -> None:
    ns = f"ns-{uuid.uuid4().hex[:6]}"
    sink = tmp_path / "out.jsonl"
    body = export("changing", {"jsonLines": {"path": str(sink)}})
    assert admin.post(f"{EXPORTS}/namespaces/{ns}/eventexports", body).status == 201
    exporter = started(server, admin, ns, "changing", tmp_path / "exporter.log")
    try:
        asyncio.run(write_events(server, [ns], rate=200, seconds=0.5, prefix="before"))
        wait_until(lambda: len(read_lines(sink)) == 100, timeout=30, message="the first 100 records")
        patch = {"spec": {"drop": [{"reason": "^Reason[0-5]$"}]}}  # only Reason6 passes now
        assert admin.patch(f"{EXPORTS}/namespaces/{ns}/eventexports/changing", patch).status == 200
        wait_until(lambda: status(admin, ns, "changing").get("observedGeneration") == 2, timeout=30)
        asyncio.run(write_events(server, [ns], rate=200, seconds=0.5, prefix="after"))
        after = {f"after-{i}" for i in range(100) if i % 7 == 6}

        def names() -> list[str]:
            return [r["event"]["metadata"]["name"] for r in read_lines(sink)]

        wait_until(lambda: after <= set(names()), timeout=30, message="the records after the change")
        assert exporter.stop() == 0
        got = names()
        assert len(got) == len(set(got)) == 100 + len(after)  # nothing twice, nothing dropped wrongly
    finally:
        exporter.stop()


def test_sigterm_while_the_sink_keeps_failing_stops_at_once_before_the_undelivered(
    server: ServerProcess, admin: Api, tmp_path: Path
) -> None:
    ns = f"ns-{uuid.uuid4().hex[:6]}"
    body = export("failing", {"webhook": {"url": f"http://127.0.0.1:{free_port()}/nobody"}})
    assert admin.post(f"{EXPORTS}/namespaces/{ns}/eventexports", body).status == 201
    exporter = started(server, admin, ns, "failing", tmp_path / "exporter.log")
    try:
        written = admin.post(f"{EVENTS}/namespaces/{ns}/events", event("lost-not", ns)).json
        failing = lambda: status(admin, ns, "failing").get("lastError")  # noqa: E731
        wait_until(failing, timeout=30, message="the sink's error in the status")
        began = time.monotonic()
        assert exporter.stop() == 0
        assert time.monotonic() - began < 5
        position = int(status(admin, ns, "failing")["position"])
        assert position < int(written["metadata"]["resourceVersion"])  # sent again at the next start
        conditions = {
            c["type"]: (c["status"], c["reason"]) for c in status(admin, ns, "failing")["conditions"]
        }
        assert conditions["Ready"] == ("False", "SinkFailed")
    finally:
        exporter.stop()


def test_a_deleted_export_ends_it_and_a_mistake_is_one_line(
    server: ServerProcess, admin: Api, tmp_path: Path
) -> None:
    ns = f"ns-{uuid.uuid4().hex[:6]}"
    body = export("brief", {"jsonLines": {"path": str(tmp_path / "out.jsonl")}})
    assert admin.post(f"{EXPORTS}/namespaces/{ns}/eventexports", body).status == 201
    exporter = started(server, admin, ns, "brief", tmp_path / "exporter.log")
    assert admin.delete(f"{EXPORTS}/namespaces/{ns}/eventexports/brief").status == 200
    assert exporter.process is not None
    assert exporter.process.wait(timeout=30) == 0
    assert f"the EventExport {ns}/brief was deleted" in (tmp_path / "exporter.log").read_text()
    env = {"KUBECONFIG": str(server.kubeconfig), "PATH": "/usr/bin:/bin"}
    missing = subprocess.run(
        [sys.executable, "-m", "coreio_export", "absent", "-n", ns],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert (missing.returncode, missing.stderr) == (
        1,
        f"coreio-export: error: the EventExport {ns}/absent is not found\n",
    )


def test_leader_election_against_a_server_without_leases_is_one_line(server: ServerProcess) -> None:
    """coreio on its own serves no Leases (kube-apiserver does): --leader-elect says so at once."""
    env = {"KUBECONFIG": str(server.kubeconfig), "PATH": "/usr/bin:/bin"}
    answer = subprocess.run(
        [sys.executable, "-m", "coreio_export", "any", "--leader-elect"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert (answer.returncode, answer.stderr) == (
        1,
        "coreio-export: error: --leader-elect needs the cluster's Leases (coordination.k8s.io/v1), which "
        "this server does not serve: run it against kube-apiserver, or without --leader-elect\n",
    )
