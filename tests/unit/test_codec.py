"""Request bodies as Go's decoders read them: repeated keys kept for strict decoding, YAML's
reported by line as yaml.v2 reports them, YAML turned into JSON with sorted keys."""

from __future__ import annotations

import pytest

from apiserver.http.codec import parse_json, parse_yaml
from apiserver.machinery import jsonvalue
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
