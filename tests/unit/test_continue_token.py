"""Continue tokens: what k8s.io/apiserver encodes, and its words for a token that does not decode
(checked against storage.DecodeContinue)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from apiserver.machinery import continue_token

PREFIX = "/registry/events.core.io/events/"


def token(payload: Any) -> str:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_a_token_round_trips() -> None:
    encoded = continue_token.encode(PREFIX + "ns/b\x00", PREFIX, 42)
    assert "=" not in encoded
    assert continue_token.decode(encoded, PREFIX) == continue_token.ContinueToken(42, PREFIX + "ns/b\x00")


def test_a_start_key_with_a_leading_slash_is_cleaned_as_go_cleans_it() -> None:
    decoded = continue_token.decode(token({"v": "meta.k8s.io/v1", "rv": -1, "start": "/ns/a"}), PREFIX)
    assert decoded == continue_token.ContinueToken(-1, PREFIX + "ns/a")


NOT_VALID = "continue key is not valid"
V1 = "meta.k8s.io/v1"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("not-a-token", f"{NOT_VALID}: invalid character '\\u009e' looking for beginning of value"),
        ("abcde", f"{NOT_VALID}: illegal base64 data at input byte 4"),
        ("ab==", f"{NOT_VALID}: illegal base64 data at input byte 2"),
        ("a+b/", f"{NOT_VALID}: illegal base64 data at input byte 1"),
        (token(b'{"v":"meta'), f"{NOT_VALID}: unexpected end of JSON input"),
        (
            token([1]),
            f"{NOT_VALID}: json: cannot unmarshal array into Go value of type storage.continueToken",
        ),
        (
            token({"v": 1, "rv": 5, "start": "a"}),
            f"{NOT_VALID}: json: cannot unmarshal number into Go struct field continueToken.v of type string",
        ),
        (
            token({"v": V1, "rv": 1.5, "start": "a"}),
            f"{NOT_VALID}: json: cannot unmarshal number 1.5 into Go struct field continueToken.rv "
            "of type int64",
        ),
        (
            token({"v": "other", "rv": 5, "start": "a"}),
            f"{NOT_VALID}: server does not recognize this encoded version other",
        ),
        (token(None), f"{NOT_VALID}: server does not recognize this encoded version "),
        (
            token({"v": V1, "rv": 0, "start": "a"}),
            f"{NOT_VALID}: incorrect encoded start resourceVersion (version {V1})",
        ),
        (token({"v": V1, "rv": 5, "start": ""}), f"{NOT_VALID}: encoded start key empty (version {V1})"),
        (token({"v": V1, "rv": 5, "start": "../a"}), f"{NOT_VALID}: ../a"),
        (token({"v": V1, "rv": 5, "start": "a/"}), f"{NOT_VALID}: a/"),
    ],
)
def test_a_token_that_does_not_decode_is_refused_as_upstream_words_it(given: str, message: str) -> None:
    with pytest.raises(continue_token.InvalidContinueError) as caught:
        continue_token.decode(given, PREFIX)
    assert str(caught.value) == message


def test_field_names_match_without_regard_to_case_as_go_matches_them() -> None:
    decoded = continue_token.decode(token({"V": V1, "RV": 7, "Start": "x"}), PREFIX)
    assert decoded == continue_token.ContinueToken(7, PREFIX + "x")
