"""etcd's RangeResponse read from its bytes (storage/etcd/wire.py) gives what protobuf's own parse
gives, field for field, for any response protobuf writes, with fields coreio does not read or
know skipped; bytes that are not a whole response fail with MalformedError, never anything else."""

from __future__ import annotations

from typing import Any

from aetcd import rpc
from hypothesis import given
from hypothesis import strategies as st

from apiserver.storage.etcd.keys import Keys
from apiserver.storage.etcd.wire import MalformedError, RangePage, parse_range

PREFIX = "/coreio-é"  # a prefix of more bytes than characters
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
REVISION = st.integers(min_value=0, max_value=2**63 - 1)


@st.composite
def key_values(draw: st.DrawFn) -> Any:
    return rpc.KeyValue(
        key=(PREFIX + draw(st.text(max_size=40))).encode(),
        value=draw(st.binary(max_size=300)),
        create_revision=draw(REVISION),
        mod_revision=draw(REVISION),
        version=draw(INT64),
        lease=draw(INT64),
    )


@st.composite
def responses(draw: st.DrawFn) -> Any:
    response = rpc.RangeResponse(
        kvs=draw(st.lists(key_values(), max_size=8)), more=draw(st.booleans()), count=draw(INT64)
    )
    response.header.revision = draw(REVISION)
    response.header.cluster_id = draw(st.integers(min_value=0, max_value=2**64 - 1))
    response.header.raft_term = draw(st.integers(min_value=0, max_value=2**64 - 1))
    return response


def as_protobuf_reads_it(data: bytes) -> RangePage:
    response = rpc.RangeResponse.FromString(data)
    keys = Keys(PREFIX)
    items = [keys.key_value(kv) for kv in response.kvs]
    return RangePage(items, response.header.revision, response.more, response.count)


@given(responses())
def test_a_response_reads_as_protobuf_reads_it(response: Any) -> None:
    data = response.SerializeToString()
    assert parse_range(data, len(PREFIX.encode())) == as_protobuf_reads_it(data)


def unknown_fields() -> bytes:
    """Fields 90-93, one of each wire type proto3 writes: a varint, 64 bits, bytes, 32 bits."""
    return bytes(
        [
            *(0xD0, 0x05, 0xAC, 0x02),  # 90, varint 300
            *(0xD9, 0x05, *range(8)),  # 91, fixed64
            *(0xE2, 0x05, 0x03, 0x61, 0x62, 0x63),  # 92, bytes "abc"
            *(0xED, 0x05, *range(4)),  # 93, fixed32
        ]
    )


@given(responses())
def test_fields_it_does_not_read_are_skipped_wherever_they_come(response: Any) -> None:
    for kv in response.kvs:  # unknown fields inside each kv, after its own
        kv.MergeFromString(unknown_fields())
    data = unknown_fields() + response.SerializeToString() + unknown_fields()
    assert parse_range(data, len(PREFIX.encode())) == as_protobuf_reads_it(data)


@given(responses(), st.data())
def test_cut_short_it_reads_whole_fields_or_fails_as_malformed(response: Any, data: st.DataObject) -> None:
    whole = response.SerializeToString()
    cut = whole[: data.draw(st.integers(min_value=0, max_value=max(0, len(whole) - 1)))]
    try:
        page = parse_range(cut, len(PREFIX.encode()))
    except MalformedError:
        return
    assert page == as_protobuf_reads_it(cut)  # the cut fell between two fields


def test_garbage_fails_as_malformed() -> None:
    for data in (b"\x0f", b"\xff" * 11, b"\x12\x05ab", b"\x12\x80"):
        try:
            parse_range(data, 0)
        except MalformedError:
            continue
        raise AssertionError(f"{data!r} was read")


def test_an_empty_answer_is_an_empty_page() -> None:
    assert parse_range(b"", 0) == RangePage([], 0, False, 0)
