"""A storm of Warnings shows in /metrics without an exporter (issue 25): coreio_events_written_total
counts each Event the real kubectl stores (creates, and updates of its series), by type, reason and
namespace, and not dry runs, unchanged writes or deletions; reasons beyond --events-metric-max-reasons
are counted as `other`. On both storages, with two workers (their counts summed, as Prometheus would)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.kubectl import Kubectl, event_body
from tests.support.metrics import samples
from tests.support.server import BACKENDS, ServerProcess, backend_args, start_server

pytestmark = pytest.mark.tools

NAME = "coreio_events_written_total"


@pytest.fixture(scope="module", params=BACKENDS)
def counted(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    server = start_server(
        tmp_path_factory.mktemp(f"events-written-{request.param}"),
        [*backend_args(request, request.param), "--workers=2", "--events-metric-max-reasons=2"],
    )
    try:
        yield server
    finally:
        server.stop()


def written(server: ServerProcess) -> dict[tuple[str, str, str], float]:
    """(type, reason, namespace) -> Events written, summed over the workers."""
    totals: dict[tuple[str, str, str], float] = {}
    for labels, value in samples(server, NAME):
        key = (labels["type"], labels["reason"], labels["namespace"])
        totals[key] = totals.get(key, 0.0) + value
    return totals


def warning(name: str, namespace: str, reason: str) -> str:
    body = event_body(name, namespace)
    body.update(type="Warning", reason=reason, note=f"{reason} on {name}")
    return yaml.safe_dump(body)


def test_warnings_are_counted_as_stored_by_type_reason_and_namespace(
    counted: ServerProcess, kubectl: Path
) -> None:
    cli = Kubectl(kubectl, counted.kubeconfig)
    # Two reasons in all: whichever worker serves a request names both (--events-metric-max-reasons).
    for index in range(3):
        cli.run("create", "-f", "-", input=warning(f"backoff-{index}", "team-a", "BackOff"))
    cli.run("create", "-f", "-", input=yaml.safe_dump(event_body("started", "team-a")))  # Normal, Started
    cli.run("create", "-f", "-", input=warning("backoff", "team-b", "BackOff"))
    # A recorder's repeated occurrence: the series updated, a new version stored; the same patch
    # again changes nothing and stores nothing.
    series = json.dumps({"series": {"count": 2, "lastObservedTime": "2026-11-22T02:17:41.123456Z"}})
    for _ in range(2):
        cli.run("patch", "events.events.core.io", "backoff-0", "-n", "team-a", "--type=merge", "-p", series)
    # Not stored either: a dry run; and a deletion is no Event written.
    cli.run("create", "--dry-run=server", "-f", "-", input=warning("dry", "team-a", "BackOff"))
    cli.run("delete", "events.events.core.io", "backoff-1", "-n", "team-a")
    assert written(counted) == {
        ("Warning", "BackOff", "team-a"): 4,
        ("Normal", "Started", "team-a"): 1,
        ("Warning", "BackOff", "team-b"): 1,
    }


def test_reasons_beyond_the_cap_are_counted_as_other(counted: ServerProcess, kubectl: Path) -> None:
    cli = Kubectl(kubectl, counted.kubeconfig)
    before = written(counted)
    reasons = [f"Made{index}Up" for index in range(8)]
    for index, reason in enumerate(reasons):
        cli.run("create", "-f", "-", input=warning(f"made-up-{index}", "team-c", reason))
    counts = written(counted)
    assert sum(counts.values()) == sum(before.values()) + len(reasons)
    # Each of the two workers names two reasons at most (after this module's first test, BackOff and
    # Started are among them already), whichever requests it served.
    named = {
        reason: n
        for (_, reason, namespace), n in counts.items()
        if namespace == "team-c" and reason != "other"
    }
    assert set(named) <= set(reasons) and len(named) <= 2 * 2
    assert counts[("Warning", "other", "team-c")] == len(reasons) - sum(named.values())
