"""What clients see once the server has compacted history: 410 Expired for lists and watches
that start too far back, and the inconsistent-continue token that lets a paginated list finish."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.api import Api, rb_path, rolebinding
from tests.support.server import BACKENDS, ServerProcess, own_storage_server
from tests.support.waiting import wait_until


@pytest.fixture(scope="module", params=BACKENDS)
def compacting_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server compacting every second; on etcd with an etcd of its own, since compaction is global."""
    data_dir = Path(tmp_path_factory.mktemp(f"coreio-compact-{request.param}"))
    with own_storage_server(request.param, data_dir, ["--compaction-interval", "1"]) as process:
        yield process


@pytest.fixture(scope="module")
def capi(compacting_server: ServerProcess) -> Api:
    return Api(compacting_server)


def _wait_until_compacted(api: Api, revision: str) -> None:
    """Writes now and then (compaction keeps what is newer than a second ago) until `revision` is gone."""
    fillers = itertools.count(1)

    def compacted() -> bool:
        exact = api.get(f"{rb_path('compact')}?resourceVersion={revision}&resourceVersionMatch=Exact")
        if exact.status == 410:
            return True
        api.post(rb_path("filler"), rolebinding(f"f{next(fillers)}"))
        return False

    wait_until(compacted, timeout=20, interval=0.3, message=f"revision {revision} to be compacted")


def test_expired_list_continue_and_watch(capi: Api) -> None:
    for name in ("a", "b", "c"):
        assert capi.post(rb_path("compact"), rolebinding(name)).status == 201
    first = capi.get(f"{rb_path('compact')}?limit=1").json
    revision = first["metadata"]["resourceVersion"]
    token = first["metadata"]["continue"]
    _wait_until_compacted(capi, revision)

    exact = capi.get(f"{rb_path('compact')}?resourceVersion={revision}&resourceVersionMatch=Exact")
    assert exact.status == 410
    assert exact.json["reason"] == "Expired"
    assert exact.json["message"] == "The resourceVersion for the provided list is too old."

    # The continue token's snapshot is gone: 410 with a token to finish the list inconsistently.
    expired = capi.get(f"{rb_path('compact')}?limit=1&continue={token}")
    assert expired.status == 410 and expired.json["reason"] == "Expired"
    assert "inconsistent list" in expired.json["message"]
    inconsistent = expired.json["metadata"]["continue"]
    decoded = json.loads(base64.urlsafe_b64decode(inconsistent + "=" * (-len(inconsistent) % 4)))
    assert decoded == {"v": "meta.k8s.io/v1", "rv": -1, "start": "a\u0000"}
    rest = capi.get(f"{rb_path('compact')}?limit=5&continue={inconsistent}").json
    assert [item["metadata"]["name"] for item in rest["items"]] == ["b", "c"]
    assert int(rest["metadata"]["resourceVersion"]) > int(revision)

    # A watch from the compacted revision ends with an ERROR carrying 410 Expired.
    with capi.watch(f"{rb_path('compact')}?watch=1&resourceVersion={revision}") as stream:
        events = list(stream)
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["kind"] == "Status" and status["code"] == 410 and status["reason"] == "Expired"
    assert status["message"].startswith(f"too old resource version: {revision} (")
