"""The hot paths' JSON (orjson) writes the bytes the standard library writes for what objects hold,
and reads what it reads; what orjson refuses still goes through the standard library."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.machinery import fastjson

# What objects of these kinds hold: strings (any Unicode but lone surrogates), 64-bit integers,
# booleans, null, and lists and maps of them.
TEXT = st.text(st.characters(exclude_categories=["Cs"]))
SCALARS = st.one_of(TEXT, st.integers(-(2**63), 2**64 - 1), st.booleans(), st.none())
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner) | st.dictionaries(TEXT, inner), max_leaves=30)


def stdlib(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


@settings(max_examples=500)
@given(VALUES)
def test_the_bytes_are_the_standard_librarys(value: Any) -> None:
    assert fastjson.dumps(value) == stdlib(value)
    assert fastjson.loads(fastjson.dumps(value)) == value


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, {"a": "\ud800"}])
def test_what_orjson_refuses_is_written_as_before(value: Any) -> None:
    try:
        expected: bytes | type[Exception] = stdlib(value)
    except UnicodeEncodeError:
        expected = UnicodeEncodeError
    if isinstance(expected, bytes):
        assert fastjson.dumps(value) == expected
    else:
        with pytest.raises(expected):
            fastjson.dumps(value)


def test_what_orjson_refuses_to_read_is_read_as_before() -> None:
    assert fastjson.loads(b'{"n": 18446744073709551616}') == {"n": 2**64}
    with pytest.raises(ValueError):
        fastjson.loads(b'{"n": ')
    with pytest.raises(UnicodeDecodeError):
        fastjson.loads(b'{"n": "\xff"}')


def _emptied(value: Any) -> None:
    """Empties every object and array in `value`, innermost first."""
    if isinstance(value, dict):
        for item in value.values():
            _emptied(item)
        value.clear()
    elif isinstance(value, list):
        for item in value:
            _emptied(item)
        value.clear()


@settings(max_examples=300)
@given(VALUES)
def test_a_copy_is_equal_and_shares_no_object_or_array(value: Any) -> None:
    original = {"v": value, "nested": [value]}
    before = stdlib(original)
    copy = fastjson.copied(original)
    assert copy == original
    _emptied(copy)
    assert stdlib(original) == before


@pytest.mark.parametrize("value", [2**64, {"a": "\ud800"}, {"deep": [{"n": -(2**63) - 1}]}])
def test_what_orjson_refuses_is_copied_by_deepcopy(value: Any) -> None:
    original = {"x": value}
    copy = fastjson.copied(original)
    assert copy == original
    assert copy is not original
