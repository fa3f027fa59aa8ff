"""Request bodies as Go's decoders read them: repeated keys kept for strict decoding, YAML's
reported by line as yaml.v2 reports them, YAML turned into JSON with sorted keys."""

from __future__ import annotations

import pytest

from apiserver.http.codec import MalformedJSONError, decode_json, parse_json, parse_yaml
from apiserver.machinery import jsonsyntax, jsonvalue
from apiserver.machinery.errors import StatusError


def test_json_keeps_every_occurrence_of_a_repeated_key() -> None:
    value = parse_json(b'{"a":1,"b":{"x":1},"a":2}').value
    assert isinstance(value, jsonvalue.JSONObject)
    assert value == {"a": 2, "b": {"x": 1}} and list(value) == ["a", "b"]
    assert value.pairs == [("a", 1), ("b", {"x": 1}), ("a", 2)]
    assert not isinstance(value["b"], jsonvalue.JSONObject)


def test_yaml_repeated_keys_by_the_line_of_their_value_inner_ones_first() -> None:
    body = b'a:\n  x: 1\n  x: 2\nb: {c: "1", c: "2"}\na:\n  y: 1\n1: p\n1: q\n'
    parsed = parse_yaml(body)
    assert parsed.yaml_duplicates == [
        'line 3: key "x" already set in map',
        'line 4: key "c" already set in map',
        'line 6: key "a" already set in map',
        "line 8: key 1 already set in map",
    ]


def test_yaml_becomes_json_with_sorted_keys() -> None:
    parsed = parse_yaml(b"spec: 1\nmetadata:\n  name: x\n  foo: 1\napiVersion: v1\n")
    assert list(parsed.value) == ["apiVersion", "metadata", "spec"]
    assert list(parsed.value["metadata"]) == ["foo", "name"]
    assert parsed.yaml_duplicates == []


def test_an_alias_repeats_what_it_names() -> None:
    parsed = parse_yaml(b"a: &x {k: 1, k: 2}\nb: *x\n")
    assert parsed.yaml_duplicates == ['line 1: key "k" already set in map'] * 2


def test_an_alias_bomb_is_refused() -> None:
    levels = ["a: &a [{k: 1, k: 2}]"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    with pytest.raises(StatusError) as caught:
        parse_yaml("\n".join(levels).encode())
    assert caught.value.message.endswith("document contains excessive aliasing")


# Each answer as Go's encoding/json gives it (checked against go1.26's json.Unmarshal).
MALFORMED_JSON = [
    (b"", "unexpected end of JSON input"),
    (b"  ", "unexpected end of JSON input"),
    (b'{"metadata":', "unexpected end of JSON input"),
    (b"not-json", "invalid character 'o' in literal null (expecting 'u')"),
    (b"\x9e\xe9", "invalid character '\\u009e' looking for beginning of value"),
    (b'{"a" 1}', "invalid character '1' after object key"),
    (b"[1 2]", "invalid character '2' after array element"),
    (b'{"a":1 "b":2}', "invalid character '\"' after object key:value pair"),
    (b"{,}", "invalid character ',' looking for beginning of object key string"),
    (b"[1,]", "invalid character ']' looking for beginning of value"),
    (b"tru", "invalid character ' ' in literal true (expecting 'e')"),
    (b"nulx", "invalid character 'x' in literal null (expecting 'l')"),
    (b"-", "invalid character ' ' in numeric literal"),
    (b"-x", "invalid character 'x' in numeric literal"),
    (b"1.", "invalid character ' ' after decimal point in numeric literal"),
    (b"1.e", "invalid character 'e' after decimal point in numeric literal"),
    (b"1e+", "invalid character ' ' in exponent of numeric literal"),
    (b'"\\', "invalid character ' ' in string escape code"),
    (b'"\\q"', "invalid character 'q' in string escape code"),
    (b'"\\u12g4"', "invalid character 'g' in \\u hexadecimal character escape"),
    (b'"a\tb"', "invalid character '\\t' in string literal"),
    (b"01", "invalid character '1' after top-level value"),
    (b'{"a":1}x', "invalid character 'x' after top-level value"),
    (b'{"a":NaN}', "invalid character 'N' looking for beginning of value"),
    (b"[-Infinity]", "invalid character 'I' in numeric literal"),
    (b"'x'", "invalid character '\\'' looking for beginning of value"),
    (b"\xef\xbb\xbf{}", "invalid character '\u00ef' looking for beginning of value"),
]


@pytest.mark.parametrize(("body", "message"), MALFORMED_JSON)
def test_malformed_json_is_refused_with_gos_syntax_error(body: bytes, message: str) -> None:
    assert jsonsyntax.syntax_error(body) == message
    with pytest.raises(MalformedJSONError) as malformed:
        decode_json(body)
    assert str(malformed.value) == message
    with pytest.raises(StatusError) as caught:
        parse_json(body)
    assert (caught.value.code, caught.value.message) == (
        400,
        f"couldn't get version/kind; json parse error: {message}",
    )


def test_well_formed_json_has_no_syntax_error() -> None:
    body = b' {"a": [1, -0.5e+3, "\\u00e9\\n", true, false, null, {}, []]} '
    assert jsonsyntax.syntax_error(body) is None
    assert jsonsyntax.syntax_error(b"[" * 5000 + b"]" * 5000) is None
    assert jsonsyntax.syntax_error(b"[" * 5000 + b"]" * 4999) == "unexpected end of JSON input"
