"""coreio-export as its users run it, on SQLite and on etcd, through one minute of 500 Events a
second on a server that compacts its history every 2 s and keeps a watch cache window of 1,000
changes. Four EventExports, each with its own exporter:

- `killed` (JSON lines), its exporter killed with SIGKILL five times: nothing acknowledged lost,
  revision order per namespace, only the batch in flight at a kill sent twice;
- `webhook` (CloudEvents to a receiver that is down for the minute, then slow): nothing lost, and
  the exporter's memory stays flat while the sink is down (the server keeps the history);
- `held`, its exporter stopped for the whole minute (past the window and many compactions): it
  resumes at its position and loses nothing, because the server holds the history for it;
- `released` (maxLag 1m), stopped as long: past its maxLag the server releases its history, so it
  meets 410, lists anew and reports the gap; the Events deleted in between are not sent.
"""

from __future__ import annotations

import asyncio
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.api import Api, event
from tests.support.exporter import (
    EXPORTS,
    GROUP_VERSION,
    ExporterProcess,
    Written,
    delivery,
    export,
    read_lines,
    rss_mib,
    write_events,
)
from tests.support.server import BACKENDS, ServerProcess, free_port, own_storage_server
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import Receiver

KILLS = 5
BATCH = 100
SECONDS = 60
RATE = 500
SLOW_SECONDS = 0.3
pytestmark = pytest.mark.tools


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """Compacting every 2 s (on etcd, an etcd of its own: compaction is global), a small window."""
    args = [
        f"--runtime-config={GROUP_VERSION}=true",
        "--compaction-interval=2",
        "--watch-bookmark-interval=5",  # an export of one quiet namespace moves on by bookmarks
        "--default-watch-cache-size=1000",
    ]
    with own_storage_server(
        request.param, tmp_path_factory.mktemp(f"exporter-{request.param}"), args
    ) as process:
        yield process


def namespace() -> str:
    return f"ns-{uuid.uuid4().hex[:6]}"


@dataclass
class Scenario:
    admin: Api
    dir: Path
    ns: dict[str, str]  # what each namespace is for
    receiver: Receiver
    written: Written = field(default_factory=Written)
    kills: list[float] = field(default_factory=list)
    rss: list[tuple[float, float]] = field(default_factory=list)  # (second, MiB) of the webhook's exporter
    deleted: set[str] = field(default_factory=set)
    released_at: int = 0
    metrics: dict[str, float] = field(default_factory=dict)  # the webhook's exporter's, at the end

    def status(self, name: str) -> dict[str, Any]:
        ns = self.ns["killed-a" if name == "killed" else name]
        answer = self.admin.get(f"{EXPORTS}/namespaces/{ns}/eventexports/{name}")
        assert answer.status == 200, answer.body
        return dict(answer.json.get("status") or {})

    def position(self, name: str) -> int:
        return int(self.status(name).get("position") or 0)

    def selected(self, *names: str) -> set[tuple[str, str, int]]:
        spaces = {self.ns[n] for n in names}
        return {(ns, name, rv) for ns, name, rv, _ in self.written.events if ns in spaces}


def sent(records: list[dict[str, Any]]) -> set[tuple[str, str, int]]:
    return {
        (r["event"]["metadata"]["namespace"], r["event"]["metadata"]["name"], int(r["resourceVersion"]))
        for r in records
    }


def _create(admin: Api, ns: str, body: dict[str, Any]) -> None:
    created = admin.post(f"{EXPORTS}/namespaces/{ns}/eventexports", body)
    assert created.status == 201, created.body


def _started(scenario: Scenario, name: str, ns: str, *args: str) -> ExporterProcess:
    exporter = ExporterProcess(scenario.admin.server, ns, name, scenario.dir / f"{name}.log", list(args))
    exporter.start()
    wait_until(lambda: scenario.position(name), timeout=30, message=f"{name}'s first position")
    return exporter


@pytest.fixture(scope="module")
def minute(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    roles = ["killed-a", "killed-b", "webhook", "held", "released", "elsewhere"]
    scenario = Scenario(
        Api(server),
        tmp_path_factory.mktemp("sinks"),
        {r: namespace() for r in roles},
        Receiver(free_port(), SLOW_SECONDS),
    )
    _create_exports(scenario)
    _stop_at_first_positions(scenario)
    killed = _started(scenario, "killed", scenario.ns["killed-a"])
    metrics_at = f"127.0.0.1:{free_port()}"
    webhook = _started(scenario, "webhook", scenario.ns["webhook"], f"--metrics-bind-address={metrics_at}")
    exporters = [killed, webhook]  # every one started, stopped whatever happens
    try:
        scenario.written = asyncio.run(
            write_events(
                server,
                list(scenario.ns.values()),
                rate=RATE,
                seconds=SECONDS,
                prefix="e",
                during=_kills_and_memory(scenario, killed, webhook),
                kind=every_other_round,
            )
        )
        scenario.receiver.start()  # the sink is back, slow
        _release(scenario)
        exporters += [_restarted(scenario, name) for name in ("held", "released")]
        _caught_up(scenario)
        scenario.metrics = _scraped(f"http://{metrics_at}/metrics")
        for exporter in exporters:
            assert exporter.stop() == 0
        yield scenario
    finally:
        for exporter in exporters:
            exporter.stop()
        scenario.receiver.stop()


def _create_exports(scenario: Scenario) -> None:
    ns, d = scenario.ns, scenario.dir

    def lines(name: str) -> dict[str, Any]:
        return {"jsonLines": {"path": str(d / f"{name}.jsonl")}}

    _create(scenario.admin, ns["released"], export("released", lines("released"), maxLag="1m"))
    _create(scenario.admin, ns["held"], export("held", lines("held")))
    both = [ns["killed-a"], ns["killed-b"]]
    killed = export("killed", lines("killed"), namespaces=both, drop=[{"reason": "^Reason3$"}])
    _create(scenario.admin, ns["killed-a"], killed)
    hook = {"webhook": {"url": scenario.receiver.url, "format": "CloudEvents"}}
    _create(scenario.admin, ns["webhook"], export("webhook", hook, match=[{"type": "Warning"}]))


def _stop_at_first_positions(scenario: Scenario) -> None:
    """`released` and `held` stopped at their first positions, `released`'s well before `held`'s
    (Events written between them): the history held for `held` does not reach back to `released`'s."""
    ns = scenario.ns
    assert _started(scenario, "released", ns["released"]).stop() == 0
    events = f"/apis/events.core.io/v1/namespaces/{ns['elsewhere']}/events"
    for i in range(5):
        assert scenario.admin.post(events, event(f"spacer-{i}", ns["elsewhere"])).status == 201
    assert _started(scenario, "held", ns["held"]).stop() == 0


def _kills_and_memory(
    scenario: Scenario, killed: ExporterProcess, webhook: ExporterProcess
) -> Callable[[float], None]:
    """What happens during the minute: `killed` killed every 10 s from the 5th (and started again
    at once), the webhook's exporter's memory sampled each second."""

    def meanwhile(elapsed: float) -> None:
        if len(scenario.kills) < KILLS and elapsed >= 5 + 10 * len(scenario.kills):
            killed.kill()
            scenario.kills.append(elapsed)
            killed.start()
        if (not scenario.rss or elapsed - scenario.rss[-1][0] >= 1) and webhook.process is not None:
            scenario.rss.append((elapsed, rss_mib(webhook.process.pid)))

    return meanwhile


def _restarted(scenario: Scenario, name: str) -> ExporterProcess:
    exporter = ExporterProcess(scenario.admin.server, scenario.ns[name], name, scenario.dir / f"{name}.log")
    exporter.start()
    return exporter


def _caught_up(scenario: Scenario) -> None:
    """Waits until every export's position reaches the newest revision."""
    newest = int(
        scenario.admin.get("/apis/events.core.io/v1/events?limit=1").json["metadata"]["resourceVersion"]
    )
    for name in ("killed", "webhook", "held", "released"):
        wait_until(
            lambda name=name: scenario.position(name) >= newest,  # type: ignore[misc]
            timeout=120,
            interval=0.5,
            message=lambda name=name: f"{name}'s position to reach {newest}: {scenario.status(name)}",  # type: ignore[misc]
        )


def _scraped(url: str) -> dict[str, float]:
    """Each sample's value by name (one export, so one series a name)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples}


def every_other_round(i: int) -> str:
    """Warning and Normal in turn in each namespace (the writes go round the six namespaces)."""
    return "Warning" if (i // 6) % 2 else "Normal"


def _release(scenario: Scenario) -> None:
    """Waits until `released`'s history is compacted (it is past its maxLag of 1m), then deletes
    ten of its Events: they are gone before its exporter lists anew."""
    position = scenario.position("released")
    events = f"/apis/events.core.io/v1/namespaces/{scenario.ns['released']}/events"

    def compacted() -> bool:
        return (
            scenario.admin.get(f"{events}?resourceVersion={position + 1}&resourceVersionMatch=Exact").status
            == 410
        )

    wait_until(compacted, timeout=60, interval=0.5, message="the released export's history to be compacted")
    names = sorted(name for ns, name, _, _ in scenario.written.events if ns == scenario.ns["released"])[:10]
    for name in names:
        assert scenario.admin.delete(f"{events}/{name}").status == 200
    scenario.deleted = set(names)
    scenario.released_at = position


def test_killed_five_times_under_load_it_loses_nothing(minute: Scenario) -> None:
    got = delivery(read_lines(minute.dir / "killed.jsonl"))
    expected = {e for e in minute.selected("killed-a", "killed-b") if int(e[1].rsplit("-", 1)[1]) % 7 != 3}
    print(
        f"\nkilled: {len(expected)} selected, {len(got.first)} delivered, "
        f"{got.duplicates} duplicates across {KILLS} kills"
    )
    assert len(minute.kills) == KILLS and minute.written.refused == 0
    assert len(minute.written.events) == RATE * SECONDS
    delivered = sent(list(got.first.values()))
    assert expected - delivered == set(), f"{len(expected - delivered)} acknowledged Events never delivered"
    assert delivered - expected == set(), "Events the export does not select were delivered"
    assert got.out_of_order == []
    assert got.duplicates <= KILLS * BATCH
    conditions = {c["type"]: c["status"] for c in minute.status("killed")["conditions"]}
    assert conditions == {"Ready": "True", "Lagging": "False"}


def test_a_sink_down_for_a_minute_then_slow_loses_nothing_in_bounded_memory(minute: Scenario) -> None:
    got = delivery(minute.receiver.records)
    warnings = {(ns, name, rv) for ns, name, rv, kind in minute.written.events if kind == "Warning"}
    expected = minute.selected("webhook") & warnings
    assert expected
    during_outage = [mib for second, mib in minute.rss if second >= 5]
    print(
        f"\nwebhook: {len(got.first)} delivered, exporter RSS "
        f"{min(during_outage):.1f}-{max(during_outage):.1f} MiB while the sink was down"
    )
    assert sent(list(got.first.values())) == expected
    assert got.out_of_order == [] and got.duplicates == 0
    assert minute.receiver.content_types == {"application/cloudevents-batch+json"}
    assert max(during_outage) - min(during_outage) < 16, minute.rss
    status = minute.status("webhook")
    assert status["counts"]["failed"] > 0 and "POST " in status["lastError"]
    assert status["counts"].get("gaps", 0) == 0
    metrics = minute.metrics
    assert metrics["coreio_export_records_sent_total"] == len(expected) == status["counts"]["sent"]
    assert metrics["coreio_export_records_failed_total"] == status["counts"]["failed"]
    assert metrics["coreio_export_records_retried_total"] >= metrics["coreio_export_records_failed_total"]
    assert metrics["coreio_export_batches_total"] == status["counts"]["batches"]
    assert 0 < metrics["coreio_export_position"] <= int(status["position"])  # a bookmark may follow
    assert (
        metrics["coreio_export_gaps_total"] == 0
        and metrics["coreio_export_last_success_timestamp_seconds"] > 0
    )


def test_stopped_past_the_window_and_compactions_it_resumes_where_it_was(minute: Scenario) -> None:
    got = delivery(read_lines(minute.dir / "held.jsonl"))
    assert sent(list(got.first.values())) == minute.selected("held")
    assert got.out_of_order == [] and got.duplicates == 0
    status = minute.status("held")
    assert status["counts"].get("gaps", 0) == 0
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"Ready": "True", "Lagging": "False"}


def test_stopped_past_its_max_lag_it_lists_anew_and_reports_the_gap(minute: Scenario) -> None:
    got = delivery(read_lines(minute.dir / "released.jsonl"))
    stored = {e for e in minute.selected("released") if e[1] not in minute.deleted}
    assert sent(list(got.first.values())) == stored
    assert got.out_of_order == [] and got.duplicates == 0
    status = minute.status("released")
    assert status["counts"]["gaps"] == 1
    lagging = next(c for c in status["conditions"] if c["type"] == "Lagging")
    assert (lagging["status"], lagging["reason"]) == ("True", "HistoryGone")
    assert f"the history after revision {minute.released_at} was gone" in lagging["message"]
