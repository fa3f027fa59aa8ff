"""A JSON body decoded by orjson (the common case) reads exactly as the careful decoder reads it,
and every body the careful decoder must see (a repeated key, an escape, a long number, deep
nesting) goes to it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.http import codec
from apiserver.machinery import jsonvalue

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


def careful(body: bytes) -> Any:
    return json.loads(
        body.decode("utf-8"), object_pairs_hook=jsonvalue.from_pairs, parse_constant=codec._reject_constant
    )


@settings(max_examples=300, deadline=None)
@given(value=_VALUES, ensure_ascii=st.booleans())
def test_the_quick_reading_is_the_careful_one(value: Any, ensure_ascii: bool) -> None:
    body = json.dumps(value, ensure_ascii=ensure_ascii).encode()
    quick = codec._decode_plain_json(body)
    if quick is not None:
        assert repr(quick) == repr(careful(body))


def test_bodies_that_need_the_careful_decoder_get_it() -> None:
    for body in (
        b'{"a": 1, "a": 2}',  # a repeated key: the careful decoder reports it
        b'{"a": "\\ud800"}',  # a lone surrogate, replaced as Go replaces it
        b'{"a": 18446744073709551616}',  # past 64 bits: an integer, not a float
        b'{"a": [1, -9223372036854775809]}',  # 19 digits, the shortest that may not fit
        b"[" * 102 + b"]" * 102,  # deeper than upstream allows
        b'{"a": NaN}',
    ):
        assert codec._decode_plain_json(body) is None
    assert codec.decode_json(b'{"a": 1, "a": 2}').value == {"a": 2}
