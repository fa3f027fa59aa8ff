"""The watch cache's packed values (storage/cacher/packing.py): what a read gets back is exactly what
was stored, Events shaped as a cluster's take a fraction of their size, and the cache trains its
dictionaries when it should, not in a loop."""

from __future__ import annotations

import os
import tracemalloc

import orjson
import pytest
import zstandard

from apiserver.registry.decoded import DecodedObjects
from apiserver.registry.stored import StoredObjects, typed
from apiserver.resources.event import EventKind
from apiserver.storage.cacher import packing, resource
from apiserver.storage.cacher.packing import Codec, PackedKeyValue, Packer
from apiserver.storage.cacher.state import SortedState
from apiserver.storage.interface import EventType, KeyValue, WatchEvent
from tests.support.cluster_events import stored_event

ROOT = "/registry/events.core.io/events/"


def pair(index: int, revision: int | None = None) -> KeyValue:
    event = stored_event(index)
    key = f"{ROOT}{event['metadata']['namespace']}/{event['metadata']['name']}"
    return KeyValue(key, orjson.dumps(event), revision or index + 1, index + 1)


@pytest.fixture(scope="module")
def codec() -> Codec:
    return Codec.train([pair(index).value for index in range(packing.SAMPLES)])


def packed_state(codec: Codec, count: int) -> SortedState:
    """Events 0 .. count-1 held by a state whose packer has `codec`."""
    packer = Packer()
    packer.trained(codec)
    state = SortedState(packer)
    for index in range(count):
        state.put(pair(index))
    return state


def test_cluster_shaped_events_pack_to_under_a_quarter_of_their_size(codec: Codec) -> None:
    values = [pair(index).value for index in range(5_000, 7_000)]  # none of them trained on
    packed = [codec.pack(value) for value in values]
    assert [codec.unpack(data) for data in packed] == values
    whole, kept = sum(map(len, values)), sum(map(len, packed))
    assert kept * 4 < whole, f"{whole} bytes packed to {kept}"


def test_a_packed_pair_reads_back_exactly_and_equals_its_original(codec: Codec) -> None:
    packer = Packer()
    packer.trained(codec)
    original = pair(12)
    packed = packer.pack(original)
    assert isinstance(packed, PackedKeyValue)
    assert packed.value == original.value and packed.packed != original.value
    assert (packed.key, packed.mod_revision, packed.create_revision) == (
        original.key,
        original.mod_revision,
        original.create_revision,
    )
    assert packed == original and original == packed and hash(packed) == hash(original)
    assert packed != pair(12, revision=99)


def test_a_value_that_would_not_shrink_is_kept_whole(codec: Codec) -> None:
    packer = Packer()
    packer.trained(codec)
    noise = KeyValue(f"{ROOT}ns/noise", os.urandom(300), 5, 5)
    assert packer.pack(noise) is noise


def test_nothing_is_packed_before_the_first_training() -> None:
    packer = Packer()
    kv = pair(1)
    assert packer.pack(kv) is kv
    assert not packer.due(packing.TRAIN_AT - 1)
    assert packer.due(packing.TRAIN_AT)


def test_retraining_counts_the_values_taken_in_not_the_ones_packed_again(codec: Codec) -> None:
    state = packed_state(codec, 50)
    state.repack(state.all_keys() * 3)
    assert state.packer.packed == 50


def take_in(packer: Packer, values: list[KeyValue]) -> list[bool]:
    """Whether the packer asked for a new codec after each of `values` taken in."""
    due = []
    for kv in values:
        packer.pack(kv)
        due.append(packer.due(10**5))
    return due


def test_values_like_the_trained_ones_train_no_new_codec(
    codec: Codec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packing, "CHECK_EVERY", 200)
    packer = Packer()
    packer.trained(codec)
    assert not any(take_in(packer, [pair(index) for index in range(3_000, 4_000)]))  # five checks
    assert packer.baseline is not None and packer.baseline < 0.25


def test_values_unlike_the_trained_ones_train_a_new_codec_once(
    codec: Codec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packing, "CHECK_EVERY", 200)
    packer = Packer()
    packer.trained(codec)
    assert not any(take_in(packer, [pair(index) for index in range(3_000, 3_200)]))
    # What a cluster stores may change: values of another shape pack to a larger share.
    unlike = [
        KeyValue(f"{ROOT}ns/c{index}", orjson.dumps({"data": os.urandom(400).hex()}), index, index)
        for index in range(200)
    ]
    assert take_in(packer, unlike) == [False] * 199 + [True]
    packer.trained(Codec.train([kv.value for kv in unlike] * 5))
    assert packer.baseline is None and packer.packed == 0
    assert not any(take_in(packer, unlike[:100]))


def test_a_new_codec_packs_again_what_the_earlier_one_packed(codec: Codec) -> None:
    state = packed_state(codec, 30)
    before = {key: state.get(key) for key in state.all_keys()}
    newer = Codec.train([pair(index).value for index in range(2_000, 2_000 + packing.SAMPLES)])
    state.packer.trained(newer)
    state.repack(state.all_keys())
    for key, kv in before.items():
        again = state.get(key)
        assert isinstance(again, PackedKeyValue) and again.codec is newer
        assert again.value == kv.value  # type: ignore[union-attr]


def test_a_page_and_a_deletion_over_packed_values(codec: Codec) -> None:
    state = packed_state(codec, 40)
    pairs = sorted((pair(index) for index in range(40)), key=lambda kv: kv.key)
    page = state.page(ROOT, None, 10, 77)
    assert [kv.value for kv in page.items] == [kv.value for kv in pairs[:10]]
    assert page.more and page.remaining == 30
    gone = pairs[0]
    state.apply(WatchEvent(EventType.DELETE, gone.key, 78, None, gone.value, gone.create_revision))
    assert state.get(gone.key) is None and len(state) == 39


def test_training_on_too_few_values_fails_and_waits_for_twice_as_many() -> None:
    with pytest.raises(zstandard.ZstdError):
        Codec.train([b"a", b"b"])
    packer = Packer()
    packer.untrainable(packing.TRAIN_AT)
    assert not packer.due(2 * packing.TRAIN_AT - 1)
    assert packer.due(2 * packing.TRAIN_AT)


class CountingCodec(Codec):
    """A codec counting its unpackings."""

    __slots__ = ("unpacked",)

    def unpack(self, packed: bytes) -> bytes:
        self.unpacked = getattr(self, "unpacked", 0) + 1
        return super().unpack(packed)


def test_decoded_objects_unpack_a_pair_once_and_share_it_packed_again_too() -> None:
    samples = [pair(index).value for index in range(packing.SAMPLES)]
    first_codec, second_codec = CountingCodec.train(samples), CountingCodec.train(samples)
    packer = Packer()
    packer.trained(first_codec)
    decoded = DecodedObjects(StoredObjects(EventKind(), None))  # type: ignore[arg-type]  # decodes only
    kv = packer.pack(pair(3))
    first = decoded.get(kv)
    assert first.obj["note"] == stored_event(3)["note"]
    assert first.obj["metadata"]["resourceVersion"] == str(kv.mod_revision)
    assert decoded.get(kv) is first and first_codec.unpacked == 1  # read once
    assert kv.decodes
    packer.trained(second_codec)
    again = packer.repack(kv)
    assert decoded.get(again) is first and second_codec.unpacked == 1  # compared once...
    assert decoded.get(again) is first and second_codec.unpacked == 1  # ...and not again
    assert decoded.get(pair(3)) is first  # the same object at the same revision, whole


def test_what_a_list_found_in_a_packed_value_outlives_packing_it_again(codec: Codec) -> None:
    packer = Packer()
    packer.trained(codec)
    whole = pair(3)
    # As a create stores it: typed, the kind and apiVersion first.
    kv = packer.pack(KeyValue(whole.key, orjson.dumps(typed(EventKind(), orjson.loads(whole.value))), 4, 4))
    written = DecodedObjects(StoredObjects(EventKind(), None)).compact(kv)  # type: ignore[arg-type]
    assert kv.decodes and kv.version_at > 0
    packer.trained(Codec.train([pair(index).value for index in range(2_000, 2_000 + packing.SAMPLES)]))
    again = packer.repack(kv)
    assert isinstance(again, PackedKeyValue) and again is not kv
    assert (again.decodes, again.version_at) == (True, kv.version_at)
    fresh = DecodedObjects(StoredObjects(EventKind(), None))  # type: ignore[arg-type]
    assert fresh.compact(again) == written and len(fresh) == 0  # from the value: nothing decoded


def test_a_packed_size_is_known_without_unpacking() -> None:
    codec = CountingCodec.train([pair(index).value for index in range(packing.SAMPLES)])
    packer = Packer()
    packer.trained(codec)
    kv = pair(5)
    packed = packer.pack(kv)
    assert isinstance(packed, PackedKeyValue) and packed.size == kv.size == len(kv.value)
    assert getattr(codec, "unpacked", 0) == 0


def test_packed_values_take_the_memory_of_their_packed_size(codec: Codec) -> None:
    # zstandard's compress() answers bytes with room for its largest output: kept as they are, the
    # packed values would take as much memory as whole ones.
    values = [pair(index).value for index in range(3_000, 3_500)]
    tracemalloc.start()
    try:
        packed = [codec.pack(value) for value in values]
        taken, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert taken < 2 * sum(len(data) + 64 for data in packed), (taken, sum(map(len, values)))


class RecordingTeeFake:
    """A PageTee that keeps what it is sent (a fake: the real one writes to the followers' pipes,
    as tests/integration/storage/test_watch_cache_handoff.py shows)."""

    def __init__(self) -> None:
        self.pages: list[tuple[str, int, list[KeyValue], bool]] = []

    async def send(self, root: str, revision: int, items: list[KeyValue], *, last: bool) -> None:
        self.pages.append((root, revision, list(items), last))

    def fail(self, root: str) -> None:
        raise AssertionError(f"the hand-on of {root} failed")


async def test_the_first_fill_handed_on_is_let_go_of_once_sent_with_a_fake_tee() -> None:
    """The first worker's list, as listed (values whole), is held only until the other workers have
    it: its cache packs the values meanwhile, and the whole ones would otherwise stay in memory."""
    listed = [pair(index) for index in range(2 * resource.HAND_ON_PAGE + 5)]
    tee = RecordingTeeFake()
    hand_on = resource._HandOn(tee, ROOT, list(listed), 7)  # type: ignore[arg-type]
    await hand_on.send()
    assert [kv for _, _, page, _ in tee.pages for kv in page] == listed
    assert [(root, revision, last) for root, revision, _, last in tee.pages] == [
        (ROOT, 7, False),
        (ROOT, 7, False),
        (ROOT, 7, True),
    ]
    assert hand_on.items == []
