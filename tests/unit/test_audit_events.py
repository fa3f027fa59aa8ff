"""Audit events as upstream writes them: the fields of each stage, the stages a policy omits, bodies
only at the levels that keep them (managedFields dropped when asked), and the log file rotated as
lumberjack names and prunes its backups."""

from __future__ import annotations

import datetime
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from apiserver.audit.event import RequestAudit, RequestFacts, new_audit, without_managed_fields
from apiserver.audit.logfile import RotatingAuditFile, Rotation, backup_name
from apiserver.audit.policy import AuditConfig, Level
from apiserver.auth.requestinfo import request_info
from apiserver.http.audit import source_ips
from apiserver.machinery.user import UserInfo

RECEIVED = datetime.datetime(2026, 11, 26, 10, 0, 0, 123456, tzinfo=datetime.UTC)
PATH = "/apis/rbac.authorization.core.io/v1/namespaces/team/rolebindings"
OBJECT: dict[str, Any] = {
    "metadata": {"name": "x", "managedFields": [{"manager": "kubectl"}]},
    "subjects": [],
}


def audit(
    level: Level, omit: frozenset[str] = frozenset(), *, managed: bool = False
) -> tuple[RequestAudit, list[dict[str, Any]]]:
    written: list[dict[str, Any]] = []
    facts = RequestFacts("id-1", PATH + "?fieldManager=kubectl", ["10.0.0.1"], "kubectl/v1.33", RECEIVED)
    user = UserInfo("alice", uid="u1", groups=("system:authenticated",))
    made = new_audit(
        AuditConfig(level, omit, managed), facts, user, request_info("POST", PATH, {}), written.append
    )
    return made, written


def test_an_event_carries_upstreams_fields_in_upstreams_order() -> None:
    made, written = audit(Level.METADATA)
    made.write("RequestReceived")
    made.annotate_decision(True, 'RBAC: allowed by ClusterRoleBinding "admin"')
    made.finish(201)
    received, complete = written
    assert list(received) == [
        "kind", "apiVersion", "level", "auditID", "stage", "requestURI", "verb", "user", "sourceIPs",
        "userAgent", "objectRef", "requestReceivedTimestamp", "stageTimestamp",
    ]  # fmt: skip
    assert received["stage"] == "RequestReceived"
    assert received["stageTimestamp"] == received["requestReceivedTimestamp"] == "2026-11-26T10:00:00.123456Z"
    assert received["user"] == {"username": "alice", "uid": "u1", "groups": ["system:authenticated"]}
    assert received["objectRef"] == {
        "resource": "rolebindings",
        "namespace": "team",
        "apiGroup": "rbac.authorization.core.io",
        "apiVersion": "v1",
    }
    assert (complete["stage"], complete["verb"], complete["level"]) == (
        "ResponseComplete",
        "create",
        "Metadata",
    )
    assert complete["responseStatus"] == {"metadata": {}, "code": 201}
    assert complete["annotations"] == {
        "authorization.k8s.io/decision": "allow",
        "authorization.k8s.io/reason": 'RBAC: allowed by ClusterRoleBinding "admin"',
    }
    assert complete["stageTimestamp"] > complete["requestReceivedTimestamp"]


def test_omitted_stages_are_not_written() -> None:
    made, written = audit(Level.METADATA, frozenset({"RequestReceived"}))
    made.write("RequestReceived")
    made.finish(200)
    assert [event["stage"] for event in written] == ["ResponseComplete"]


def test_a_long_running_request_that_wrote_nothing_still_starts_then_completes() -> None:
    made, written = audit(Level.METADATA)
    made.long_running = True
    made.finish(200)
    assert [event["stage"] for event in written] == ["ResponseStarted", "ResponseComplete"]


def test_a_panic_is_its_own_stage_with_upstreams_status() -> None:
    made, written = audit(Level.METADATA)
    made.panic(RuntimeError("boom"))
    assert written[0]["stage"] == "Panic"
    assert written[0]["responseStatus"] == {
        "metadata": {},
        "status": "Failure",
        "message": "APIServer panic'd: boom",
        "reason": "InternalError",
        "code": 500,
    }


@pytest.mark.parametrize(
    ("level", "request_kept", "response_kept"),
    [
        (Level.METADATA, False, False),
        (Level.REQUEST, True, False),
        (Level.REQUEST_RESPONSE, True, True),
    ],
)
def test_bodies_are_kept_only_at_the_levels_that_ask(
    level: Level, request_kept: bool, response_kept: bool
) -> None:
    made, written = audit(level)
    made.set_request_object(OBJECT)
    made.set_response_object(OBJECT)
    made.finish(201)
    assert ("requestObject" in written[0], "responseObject" in written[0]) == (request_kept, response_kept)
    if response_kept:
        assert written[0]["responseObject"]["metadata"]["managedFields"] == [{"manager": "kubectl"}]


def test_omit_managed_fields_drops_them_from_both_bodies_and_list_items() -> None:
    made, written = audit(Level.REQUEST_RESPONSE, managed=True)
    made.set_request_object(OBJECT)
    made.set_response_object({"kind": "RoleBindingList", "items": [OBJECT, OBJECT]})
    made.finish(200)
    assert written[0]["requestObject"]["metadata"] == {"name": "x"}
    assert [item["metadata"] for item in written[0]["responseObject"]["items"]] == [{"name": "x"}] * 2
    assert OBJECT["metadata"]["managedFields"], "the object itself is left alone"
    assert without_managed_fields({"kind": "Status"}) == {"kind": "Status"}


def test_a_status_answer_is_copied_into_the_response_status() -> None:
    made, written = audit(Level.METADATA)
    made.set_status(403, {"status": "Failure", "message": "forbidden", "reason": "Forbidden", "code": 403})
    made.finish(403)
    assert written[0]["responseStatus"] == {
        "metadata": {},
        "status": "Failure",
        "message": "forbidden",
        "reason": "Forbidden",
        "code": 403,
    }


class Clock(datetime.datetime):
    """now() a second later at each call."""

    moment = datetime.datetime(2026, 11, 26, 10, 0, 0, 5000, tzinfo=datetime.UTC)

    @classmethod
    def now(cls, tz: datetime.tzinfo | None = None) -> Clock:
        Clock.moment += datetime.timedelta(seconds=1)
        return cls.fromtimestamp(Clock.moment.timestamp(), tz)


def test_backups_are_named_as_lumberjack_names_them() -> None:
    moment = datetime.datetime(2026, 11, 26, 10, 0, 0, 5000, tzinfo=datetime.UTC)
    assert backup_name(Path("/var/log/audit.log"), moment) == Path(
        "/var/log/audit-2026-11-26T10-00-00.005.log"
    )


def write_lines(handler: RotatingAuditFile, count: int, size: int) -> None:
    for i in range(count):
        handler.write(f"{i:0{size - 1}d}\n".encode())


def test_the_file_rotates_past_its_size_keeping_the_newest_backups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apiserver.audit.logfile.MEGABYTE", 1000)
    log = tmp_path / "audit.log"
    handler = RotatingAuditFile(log, Rotation(max_size_mb=1, max_backups=2), now=Clock)
    write_lines(handler, 35, 100)  # 3500 bytes: 1000 a file, three rotations
    handler.close()
    backups = sorted(p for p in tmp_path.iterdir() if p != log)
    assert len(backups) == 2 and all(p.name.startswith("audit-2026-11-26T10-00-") for p in backups)
    assert all(p.stat().st_size == 1000 for p in backups)
    # The oldest backup (lines 0-9) was removed; the newest two and the file hold the rest.
    assert [int(p.read_text().split()[0]) for p in backups] == [10, 20]
    assert log.stat().st_size == 500 and int(log.read_text().split()[-1]) == 34


def test_backups_older_than_max_age_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("apiserver.audit.logfile.MEGABYTE", 1000)
    log = tmp_path / "audit.log"
    old = tmp_path / "audit-2026-11-01T10-00-00.000.log"
    old.write_text("old\n")
    unrelated = tmp_path / "audit-notes.log"
    unrelated.write_text("kept\n")
    handler = RotatingAuditFile(log, Rotation(max_size_mb=1, max_age_days=7), now=Clock)
    write_lines(handler, 15, 100)
    handler.close()
    assert not old.exists() and unrelated.exists()
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("audit-2026-11-26")]) == 1


def test_a_file_another_worker_rotated_is_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "audit.log"
    first = RotatingAuditFile(log, Rotation(), now=Clock)
    second = RotatingAuditFile(log, Rotation(), now=Clock)
    first.write(b"a\n")
    first.rotate()
    second.write(b"b\n")
    assert log.read_text() == "b\n"
    first.close()
    second.close()


def test_the_handler_writes_each_record_as_a_line(tmp_path: Path) -> None:
    handler = RotatingAuditFile(tmp_path / "audit.log", Rotation())
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.emit(
        logging.LogRecord("coreio.audit", logging.INFO, __file__, 1, json.dumps({"a": 1}), None, None)
    )
    handler.close()
    assert (tmp_path / "audit.log").read_text() == '{"a": 1}\n'


def test_source_ips_are_the_forwarded_ones_then_the_peer_as_upstream() -> None:
    headers = {"X-Forwarded-For": "203.0.113.7, bogus, 10.0.0.2", "X-Real-Ip": "10.0.0.2"}
    assert source_ips(headers, "127.0.0.1") == ["203.0.113.7", "10.0.0.2", "127.0.0.1"]
    assert source_ips({}, None) == []
