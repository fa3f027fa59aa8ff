"""The regex library (find, findAll): cases from upstream's tests, each checked against
k8s.io/apiserver v0.33.13's library."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.cel import CompileError, EvaluationError, compile_expression

BAD = "Illegal regex: error parsing regexp: "


def evaluate(source: str) -> Any:
    return compile_expression(source, ["object"]).evaluate({"object": {"str": "123 abc 456"}})


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("object.str.find('[0-9]+')", "123"),
        ("object.str.find('xyz')", ""),
        ("object.str.findAll('[0-9]+')", ["123", "456"]),
        ("object.str.findAll('[0-9]+', 0)", []),
        ("object.str.findAll('[0-9]+', 1)", ["123"]),
        ("object.str.findAll('[0-9]+', 3)", ["123", "456"]),
        ("object.str.findAll('[0-9]+', -1)", ["123", "456"]),
        ("object.str.findAll('xyz')", []),
        ("object.str.findAll('xyz', 1)", []),
        # Go's FindAllString: an empty match abutting the previous match is left out.
        ("object.str.findAll('[0-9]*')", ["123", "", "", "", "", "456"]),
        ("'aaa'.findAll('a*?')", ["", "", "", ""]),
        ("'héllo wörld'.findAll('[^ ]l')", ["él", "rl"]),
        ("'a\\nb'.findAll('^.')", ["a"]),
        ("'abab'.findAll('(?:ab)*', -5)", ["abab"]),
    ],
)
def test_find_and_find_all(source: str, expected: Any) -> None:
    assert evaluate(source) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("'a'.find('(' + object.str)", BAD + "missing closing ): `(123 abc 456`"),
        ("'a'.findAll(object.str + ')')", BAD + "unexpected ): `123 abc 456)`"),
        ("'a'.find('a**' + '')", BAD + "invalid nested repetition operator: `**`"),
        ("'a'.findAll('a{1001}' + '', 1)", BAD + "invalid repeat count: `{1001}`"),
    ],
)
def test_bad_patterns_fail_as_upstream_words_them(source: str, message: str) -> None:
    with pytest.raises(EvaluationError) as failure:
        evaluate(source)
    assert str(failure.value) == message


@pytest.mark.parametrize("source", ["'a'.find(1)", "'a'.findAll('a', 'b')", "1.find('a')"])
def test_wrong_arguments_are_refused_by_the_checker(source: str) -> None:
    with pytest.raises(CompileError, match="found no matching overload"):
        compile_expression(source, ["object"])
