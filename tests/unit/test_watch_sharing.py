"""What watchers and lists share: each change decoded once and each event's line encoded once for
every watcher sending it as it is; listed objects decoded and encoded once per revision; and the
bytes on the wire exactly what encoding each one separately gives."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from apiserver.http import codec, responses, watchstream
from apiserver.http.watchstream import WatchWriter, encoded, watch_line
from apiserver.machinery import fastjson
from apiserver.machinery.options import ListOptions, WriteOptions
from apiserver.machinery.selectors import parse_label_selector
from apiserver.machinery.types import JSON
from apiserver.registry.decoded import DecodedObjects, ObjectList
from apiserver.registry.shared_events import RecentChanges, WatchEventOut
from apiserver.registry.store import ResourceStore
from apiserver.registry.stored import CorruptObjectError, StoredObjects, storage_root
from apiserver.resources.event import EventKind
from apiserver.storage.cacher import CachedStorage
from apiserver.storage.interface import EventType, KeyValue, Storage, WatchEvent
from apiserver.storage.sqlite.backend import SQLiteStorage

KIND = EventKind()
OBJECTS = StoredObjects(KIND, cast(Storage, None))


def event_body(name: str, namespace: str = "team-a", **labels: str) -> JSON:
    metadata: JSON = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": "events.core.io/v1",
        "kind": "Event",
        "metadata": metadata,
        "eventTime": "2026-11-22T02:16:41.123456Z",
        "reportingController": "example.com/deployer",
        "reportingInstance": "deployer-7d9f",
        "action": "Scaling",
        "reason": "ScaledUp",
        "regarding": {"kind": "Deployment", "namespace": "team-a", "name": "web"},
        "note": 'Scaled up to 3 — “ünïcode” \u2028 \\ "quoted" \U0001f600',
        "type": "Normal",
    }


def change(revision: int, value: JSON | None, previous: JSON | None, name: str = "web") -> WatchEvent:
    return WatchEvent(
        EventType.PUT if value is not None else EventType.DELETE,
        OBJECTS.key("team-a", name),
        revision,
        OBJECTS.encode(value) if value is not None else None,
        OBJECTS.encode(previous) if previous is not None else None,
    )


# ----------------------------------------------------------------------------- shared changes


def test_a_change_is_decoded_once_and_its_events_made_once() -> None:
    changes = RecentChanges(DecodedObjects(OBJECTS))
    event = change(7, event_body("web", tier="front"), event_body("web"))
    first = changes.get(event)
    assert changes.get(event) is first
    # Another storage watch hands over an equal event: the same change.
    assert changes.get(change(7, event_body("web", tier="front"), event_body("web"))) is first
    current = first.current()
    assert current is not None and current is first.current()
    assert list(current)[:2] == ["kind", "apiVersion"]
    assert current["metadata"]["resourceVersion"] == "7"
    previous = first.previous()
    assert previous is not None and "labels" not in previous["metadata"]
    assert previous["metadata"]["resourceVersion"] == "7"
    modified = first.out("MODIFIED")
    assert first.out("MODIFIED") is modified and modified.object is current
    assert first.out("DELETED").object is previous


def test_a_different_change_at_the_same_revision_is_not_taken_for_it() -> None:
    changes = RecentChanges(DecodedObjects(OBJECTS))
    first = changes.get(change(7, event_body("web", tier="front"), None))
    other = changes.get(change(7, event_body("web", tier="back"), None))
    assert other is not first
    assert other.current() is not None and other.current() != first.current()


def test_only_the_latest_changes_are_kept() -> None:
    changes = RecentChanges(DecodedObjects(OBJECTS), capacity=3)
    events = [change(revision, event_body("web"), None) for revision in range(1, 6)]
    shared = [changes.get(event) for event in events]
    assert len(changes) == 3
    assert changes.get(events[-1]) is shared[-1]
    assert changes.get(events[0]) is not shared[0]


def test_an_undecodable_change_fails_each_watcher() -> None:
    changes = RecentChanges(DecodedObjects(OBJECTS))
    event = WatchEvent(EventType.PUT, OBJECTS.key("team-a", "bad"), 9, b"{not json")
    for _ in range(2):
        with pytest.raises(CorruptObjectError):
            changes.get(event).current()


# ----------------------------------------------------------------------------- watch lines


def test_a_shared_event_is_encoded_once_as_a_watch_line() -> None:
    obj = OBJECTS.typed(OBJECTS.decode(OBJECTS.encode(event_body("web")), 3))
    event = WatchEventOut("ADDED", obj, {})
    line = encoded(event)
    # UTF-8 as it is, as kube-apiserver writes it (and every other answer here).
    stdlib = json.dumps({"type": "ADDED", "object": obj}, separators=(",", ":"), ensure_ascii=False)
    assert line == (stdlib + "\n").encode()
    assert encoded(event) is line
    # An object's encodings may be shared by events of other types: each has its own line.
    deleted = encoded(WatchEventOut("DELETED", obj, event.encodings))
    assert deleted == watch_line("DELETED", obj) and deleted != line


def test_events_of_one_watcher_and_transformed_ones_are_encoded_each_time() -> None:
    obj: JSON = {"kind": "Event", "apiVersion": "events.core.io/v1", "metadata": {"resourceVersion": "4"}}
    bookmark = WatchEventOut("BOOKMARK", obj)
    assert encoded(bookmark) == watch_line("BOOKMARK", obj)
    assert encoded(bookmark) is not encoded(bookmark)
    shared = WatchEventOut("ADDED", obj, {})
    line = encoded(shared, lambda o: {"kind": "Table", "rows": [o]})
    assert line == watch_line("ADDED", {"kind": "Table", "rows": [obj]})
    assert shared.encodings == {}


# ----------------------------------------------------------------------------- through the store


@pytest.fixture
async def store(tmp_path: Any) -> AsyncIterator[ResourceStore]:
    cached = CachedStorage(SQLiteStorage(str(tmp_path / "db.sqlite")), [storage_root(KIND)])
    await cached.start()
    try:
        async with asyncio.timeout(10):
            await cached.wait_ready()
        yield ResourceStore(KIND, cached)
    finally:
        await cached.close()


async def test_watchers_of_one_change_get_one_event(store: ResourceStore) -> None:
    now = str(await store.storage.current_revision())
    plain = await store.watch("team-a", ListOptions(resource_version=now, watch=True))
    selected = await store.watch(
        "team-a",
        ListOptions(resource_version=now, watch=True, label_selector=parse_label_selector("tier=front")),
    )
    await store.create("team-a", event_body("web", tier="front"), WriteOptions())
    async with asyncio.timeout(10):
        first = await anext(aiter(plain))
        second = await anext(aiter(selected))
    assert first.type == second.type == "ADDED"
    assert first is second
    assert encoded(first) is encoded(second)
    assert encoded(first) == watch_line("ADDED", first.object)
    # A list of the object at that revision shares it too.
    listed = await store.list("team-a", ListOptions(resource_version="0"))
    assert next(listed.shared()).obj is first.object


async def test_lists_share_decoded_objects_and_their_encodings(store: ResourceStore) -> None:
    for name in ("a", "b"):
        await store.create("team-a", event_body(name), WriteOptions())
    await store.create("team-b", event_body("c", "team-b"), WriteOptions())
    first = await store.list("team-a", ListOptions(resource_version="0"))
    second = await store.list(None, ListOptions(resource_version="0"))
    assert [item["metadata"]["name"] for item in second.body()["items"]] == ["a", "b", "c"]
    assert first.body()["items"][0] is second.body()["items"][0]
    for listed in (first, second):
        items = [(shared.obj, shared.encodings) for shared in listed.shared()]
        assert codec.encode_json_list(listed.head, items) == codec.encode_json(listed.body())
    assert next(first.shared()).encodings is next(second.shared()).encodings


async def test_a_long_list_keeps_few_objects_decoded(store: ResourceStore) -> None:
    """A list of more objects than are kept decoded checks each one, keeps none of them, and
    decodes each one again only as it is written."""
    store.reads.decoded = DecodedObjects(store.objects, capacity=3)
    for index in range(10):
        await store.create("team-a", event_body(f"e{index}"), WriteOptions())
    listed = await store.list(None, ListOptions(resource_version="0"))
    assert len(listed) == 10
    assert all(kv.decodes for kv in listed.entries)
    assert len(store.reads.decoded) <= 3
    names = [shared.obj["metadata"]["name"] for shared in listed.shared()]
    assert names == [f"e{index}" for index in range(10)]
    assert len(store.reads.decoded) == 3


# ----------------------------------------------------------------------------- list encoding


def kv(name: str, revision: int, body: JSON) -> KeyValue:
    return KeyValue(OBJECTS.key("team-a", name), OBJECTS.encode(body), revision, revision)


def test_an_object_is_decoded_once_per_revision() -> None:
    decoded = DecodedObjects(OBJECTS, capacity=2)
    first = decoded.get(kv("web", 3, event_body("web")))
    assert decoded.get(kv("web", 3, event_body("web"))) is first
    assert decoded.get(kv("web", 3, event_body("web", tier="x"))) is not first
    second = decoded.get(kv("web", 3, event_body("web", tier="x")))
    db = decoded.get(kv("db", 4, event_body("db")))
    # Read again, so the newer "db" is dropped first.
    assert decoded.get(kv("web", 3, event_body("web", tier="x"))) is second
    decoded.get(kv("api", 5, event_body("api")))
    assert len(decoded) == 2
    assert decoded.get(kv("web", 3, event_body("web", tier="x"))) is second
    assert decoded.get(kv("db", 4, event_body("db"))) is not db
    with pytest.raises(CorruptObjectError):
        decoded.get(KeyValue(OBJECTS.key("team-a", "bad"), b"[]", 6, 6))
    assert len(decoded) == 2


@pytest.mark.parametrize(
    "items",
    [[], [event_body("web")], [event_body("a"), {"x": [1, 2.5, None, True, {"y": "\ud7ff\u00e9"}]}]],
)
@pytest.mark.parametrize("chunk_bytes", [1, 100, 1 << 20])
@pytest.mark.parametrize("pretty", [False, True])
def test_a_list_encoded_item_by_item_is_the_same_bytes(
    items: list[JSON], chunk_bytes: int, pretty: bool
) -> None:
    head: JSON = {
        "kind": "EventList",
        "apiVersion": "events.core.io/v1",
        "metadata": {"resourceVersion": "12", "continue": "é"},
    }
    encodings: list[dict[str, bytes]] = [{} for _ in items]
    expected = codec.encode_json({**head, "items": items}, pretty=pretty)
    paired = zip(items, encodings, strict=True)
    pieces = list(codec.json_list_chunks(head, paired, chunk_bytes, pretty=pretty))
    assert b"".join(pieces) == expected
    assert len(pieces) >= (len(items) if chunk_bytes == 1 else 1)
    if pretty:
        return
    assert all(fastjson.COMPACT_JSON in each for each in encodings)
    # Made once: the next list reuses them.
    assert codec.encode_json_list(head, zip(items, encodings, strict=True)) == expected


def listed_objects(count: int) -> ObjectList:
    decoded = DecodedObjects(OBJECTS)
    entries = [kv(f"e{index:04d}", index + 1, event_body(f"e{index:04d}")) for index in range(count)]
    head: JSON = {"kind": "EventList", "apiVersion": "events.core.io/v1", "metadata": {}}
    return ObjectList(head, entries, decoded)


def test_a_shared_list_is_encoded_in_every_format_as_a_plain_one() -> None:
    listed = listed_objects(2)
    plain = listed.body()
    request = make_mocked_request("GET", "/apis")
    pretty = responses.OutputFormat(codec.JSON_TYPE, pretty=True)
    for fmt in (responses.JSON_OUTPUT, pretty, responses.YAML_OUTPUT):
        response = responses.list_response(request, listed, fmt)
        assert isinstance(response, web.Response)
        assert response.body == responses.encode(request, plain, fmt)


def stored(name: str, revision: int, body: JSON) -> KeyValue:
    """`body` as the create path stores it: typed (kind and apiVersion first)."""
    return KeyValue(OBJECTS.key("team-a", name), OBJECTS.encode(OBJECTS.typed(body)), revision, revision)


def decoded_json(pair: KeyValue) -> bytes:
    """What a list wrote of `pair` before its items were written from their stored values."""
    return fastjson.dumps(OBJECTS.typed(OBJECTS.from_kv(pair)))


def odd_values() -> list[tuple[str, bytes, bool]]:
    """(case, stored value, written from the value after its first encoding) for the stored forms
    a list meets."""
    # The marker in a label (escaped), and an ObjectReference's own resourceVersion further on.
    tricky = event_body("tricky", note=',"resourceVersion":"1234"')
    tricky["regarding"]["resourceVersion"] = "1234"
    # Stored by another writer with a resourceVersion: the one read replaces it.
    kept = OBJECTS.typed(event_body("kept"))
    kept["metadata"]["resourceVersion"] = "999"
    bare = event_body("bare")
    bare["metadata"] = {}  # and the only marker after it, in the ObjectReference
    bare["regarding"]["resourceVersion"] = "1234"
    return [
        ("plain", stored("x", 1_234, event_body("plain", tier="front")).value, True),
        ("its text holds the marker, escaped", stored("x", 1_234, tricky).value, True),
        ("stored with a resourceVersion", fastjson.dumps(kept), False),
        ("empty metadata", stored("x", 1_234, bare).value, False),
    ]


@pytest.mark.parametrize(
    ("case", "value", "spliced"), odd_values(), ids=[case for case, _, _ in odd_values()]
)
def test_a_list_item_is_written_from_its_stored_value_exactly_as_decoding_would_write_it(
    case: str, value: bytes, spliced: bool
) -> None:
    decoded = DecodedObjects(OBJECTS)
    pair = KeyValue(OBJECTS.key("team-a", "x"), value, 1_234, 1_234)
    first = decoded.compact(pair)
    assert first == decoded_json(pair)
    assert (pair.version_at >= 0) is spliced, case
    # Again, from a fresh set of decoded objects: written from the value, or decoded again.
    again = DecodedObjects(OBJECTS)
    assert again.compact(pair) == first
    assert len(again) == (0 if spliced else 1)


def test_a_stored_form_the_typed_object_does_not_lead_with_is_never_written_from_its_value() -> None:
    decoded = DecodedObjects(OBJECTS)
    pair = kv("web", 5, event_body("web"))  # apiVersion before kind, as no create stores it
    assert decoded.compact(pair) == decoded_json(pair)
    assert pair.version_at == -1


def test_a_long_list_is_written_from_stored_values_once_each_was_encoded() -> None:
    decoded = DecodedObjects(OBJECTS, capacity=3)
    entries = [stored(f"e{index:04d}", index + 1, event_body(f"e{index:04d}")) for index in range(50)]
    head: JSON = {"kind": "EventList", "apiVersion": "events.core.io/v1", "metadata": {}}
    expected = codec.encode_json({**head, "items": [OBJECTS.typed(OBJECTS.from_kv(e)) for e in entries]})
    request = make_mocked_request("GET", "/apis")
    for _ in range(2):
        response = responses.list_response(request, ObjectList(head, entries, decoded), responses.JSON_OUTPUT)
        assert isinstance(response, web.Response)
        assert response.body == expected
    # The second list decoded nothing: the three kept are the first list's last.
    assert [shared.obj["metadata"]["name"] for shared in map(decoded.get, entries[-3:])] == [
        "e0047",
        "e0048",
        "e0049",
    ]
    assert len(decoded) == 3


# ----------------------------------------------------------------------------- stalled clients


class Transport:
    def __init__(self) -> None:
        self.aborted = asyncio.Event()

    def abort(self) -> None:
        self.aborted.set()


class Request:
    def __init__(self) -> None:
        self.transport = Transport()


class Response:
    """Accepts `accepted` writes at once, then waits until the connection is cut."""

    def __init__(self, transport: Transport, accepted: int) -> None:
        self.transport = transport
        self.accepted = accepted
        self.written: list[bytes] = []

    async def write(self, data: bytes) -> None:
        if len(self.written) >= self.accepted:
            await self.transport.aborted.wait()
        self.written.append(data)


def writer(accepted: int, patience: float) -> tuple[WatchWriter, Request, Response]:
    request = Request()
    response = Response(request.transport, accepted)
    sender = WatchWriter(cast(web.Request, request), cast(web.StreamResponse, response), patience)
    return sender, request, response


async def test_a_client_that_accepts_nothing_for_the_send_timeout_is_cut_off() -> None:
    sender, request, response = writer(accepted=1, patience=0.2)
    assert await sender.send(b"1\n") and await sender.send(b"2\n")
    assert await sender.flush()
    await asyncio.sleep(0.15)  # most of the patience spent before the write that stalls
    loop = asyncio.get_running_loop()
    assert await sender.send(b"3\n")  # queued: the write that stalls is the flush's
    started = loop.time()
    async with asyncio.timeout(5):
        assert not await sender.flush()
    # The write that stalled had the whole timeout, though the timer was started before it.
    assert loop.time() - started >= 0.2
    assert request.transport.aborted.is_set()
    assert not await sender.send(b"4\n")
    sender.close()
    assert response.written[0] == b"1\n2\n"


async def test_clients_that_keep_reading_are_never_cut_off() -> None:
    sender, request, response = writer(accepted=1000, patience=0.05)
    for index in range(20):
        assert await sender.send(b"%d\n" % index)
        await asyncio.sleep(0.01)  # a client that keeps reading, at its pace
    assert await sender.flush()
    sender.close()
    assert not request.transport.aborted.is_set()
    assert b"".join(response.written) == b"".join(b"%d\n" % index for index in range(20))
    assert len(response.written) == 20  # 10 ms apart: each went out on its own, at once


async def test_the_events_of_one_turn_go_out_in_one_write() -> None:
    """A commit wakes every watch at once: what a watch takes before it yields is one write, and
    what comes within WRITE_INTERVAL of a write waits for the next one."""
    sender, _, response = writer(accepted=1000, patience=0)
    for index in range(3):
        await sender.send(b"%d\n" % index)
    await asyncio.sleep(0)  # the write starts
    await sender.send(b"3\n")
    await sender.send(b"4\n")
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await sender.flush()
    assert response.written == [b"0\n1\n2\n", b"3\n4\n"]
    assert loop.time() - started >= watchstream.WRITE_INTERVAL * 0.9
    sender.close()


async def test_a_watch_waits_for_its_client_past_the_pending_bound() -> None:
    sender, _, response = writer(accepted=1, patience=0)
    await sender.send(b"x" * 10)
    await sender.flush()
    event = b"y" * (watchstream.PENDING_BYTES // 4)

    async def send_six() -> None:
        for _ in range(6):
            await sender.send(event)

    sends = asyncio.create_task(send_six())
    await asyncio.sleep(0.05)
    # The client accepts nothing more: the sends past the bound wait, nothing is dropped.
    assert not sends.done()
    assert len(response.written) == 1
    sends.cancel()
    sender.close()
