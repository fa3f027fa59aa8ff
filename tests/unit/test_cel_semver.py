"""The semver library: cases from upstream's tests (semver_test.go) and blang/semver's parsing,
each checked against k8s.io/apiserver v0.33.13's library."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.cel import CompileError, EvaluationError, compile_expression


def evaluate(source: str) -> Any:
    return compile_expression(source, []).evaluate({})


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('semver("1.2.3") == semver("1.2.3")', True),
        ('semver("1.2.3") == semver("1.0.0")', False),
        ('isSemver("1.2.3-beta.1+build.1")', True),
        ('isSemver("")', False),
        ('isSemver("v1.0.0")', False),
        ('isSemver(" 1.0.0")', False),
        ('isSemver("1. 0.0")', False),
        ('isSemver("1.0.0 ")', False),
        ('isSemver("01.01.01")', False),
        ('isSemver("1")', False),
        ('isSemver("1.1")', False),
        ('isSemver("", true)', False),
        ('isSemver(" 1.0.0", true)', False),
        ('isSemver("1.0.0 ", true)', False),
        ('isSemver("v1.0.0", true)', True),
        ('isSemver("01.01.01", true)', True),
        ('isSemver("1", true)', True),
        ('isSemver("1.1", true)', True),
        ('semver("v01.01", true) == semver("1.1.0")', True),
        ('semver("00.0.0", true) == semver("0.0.0")', True),
        ('semver("v0001.0002.0003-rc.1", true).minor()', 2),
        ('semver("1.0.0").isLessThan(semver("1.2.3"))', True),
        ('semver("1.0.0").isLessThan(semver("1.0.0"))', False),
        ('semver("1.2.3").isGreaterThan(semver("1.0.0"))', True),
        ('semver("1.0.0").isGreaterThan(semver("1.0.0"))', False),
        ('semver("1.2.3").compareTo(semver("1.2.3"))', 0),
        ('semver("1.0.0").compareTo(semver("1.2.3"))', -1),
        ('semver("1.2.3").compareTo(semver("1.0.0"))', 1),
        ('semver("1.2.3").major()', 1),
        ('semver("1.2.3").minor()', 2),
        ('semver("1.2.3").patch()', 3),
        # Precedence: a prerelease before its release, numbers before words, fewer parts first.
        ('semver("1.0.0-rc.1").compareTo(semver("1.0.0"))', -1),
        ('semver("1.0.0-alpha").compareTo(semver("1.0.0-alpha.1"))', -1),
        ('semver("1.0.0-alpha.beta").compareTo(semver("1.0.0-alpha.1"))', 1),
        ('semver("1.0.0-2").compareTo(semver("1.0.0-11"))', -1),
        ('semver("1.0.0+a") == semver("1.0.0+b")', True),
        # Go's int64 of a uint64.
        ('semver("18446744073709551615.0.0").major()', -1),
        ("type(semver('1.0.0')) == kubernetes.Semver", True),
        # The comparisons are shared with the Quantity's.
        ('quantity("1").compareTo(quantity("2"))', -1),
        ('quantity("3").isGreaterThan(quantity("2"))', True),
    ],
)
def test_semver(source: str, expected: Any) -> None:
    assert evaluate(source) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('semver("v1.0")', "No Major.Minor.Patch elements found"),
        ('semver("")', "Version string empty"),
        ('semver("01.0.0")', 'Major number must not contain leading zeroes "01"'),
        ('semver("1.x.0")', 'Invalid character(s) found in minor number "x"'),
        ('semver("1.0.0-01")', 'Numeric PreRelease version must not contain leading zeroes "01"'),
        ('semver("1.0.0-a_b")', 'Invalid character(s) found in prerelease "a_b"'),
        ('semver("1.0.0-a..b")', "Prerelease is empty"),
        ('semver("1.0.0+")', "Build meta data is empty"),
        ('semver("1..0")', 'strconv.ParseUint: parsing "": invalid syntax'),
        (
            'semver("1.0.99999999999999999999")',
            'strconv.ParseUint: parsing "99999999999999999999": value out of range',
        ),
        ('semver("1.2-rc", true)', "short version cannot contain PreRelease/Build meta data"),
    ],
)
def test_semver_errors(source: str, message: str) -> None:
    with pytest.raises(EvaluationError) as failure:
        evaluate(source)
    assert str(failure.value) == message


@pytest.mark.parametrize("source", ["isSemver([1, 2, 3])", 'semver("1.0.0").isGreaterThan(quantity("1"))'])
def test_wrong_arguments_are_refused_by_the_checker(source: str) -> None:
    with pytest.raises(CompileError, match="found no matching overload"):
        compile_expression(source, [])


def test_a_semver_and_a_quantity_do_not_compare() -> None:
    """Dynamically typed values reach the shared comparison; upstream finds no overload either."""
    values = {"a": evaluate('semver("1.0.0")'), "b": evaluate('quantity("1")')}
    program = compile_expression("variables.a.compareTo(variables.b)", ["variables"])
    with pytest.raises(EvaluationError, match=r"^no such overload$"):
        program.evaluate({"variables": values})
