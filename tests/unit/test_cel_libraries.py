"""Kubernetes' CEL libraries: cases written from upstream's library tests (expression -> value, or
the error it fails with)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from apiserver.cel import CompileError, EvaluationError, compile_expression
from apiserver.cel.library.amounts import FORMAT_WRONG, SUFFIX, QuantityError, parse_quantity


def evaluate(source: str) -> Any:
    return compile_expression(source, ["object"]).evaluate({"object": {"l": [4, 5, 2], "m": [1, "a"]}})


VALUES = [
    # lists
    ("[1, 2, 3].isSorted()", True),
    ("[3, 1].isSorted()", False),
    ("['a', 'b'].isSorted()", True),
    ("[duration('1s'), duration('2s')].isSorted()", True),
    ("[].isSorted()", True),
    ("[1, 2, 3].sum()", 6),
    ("[1.5, 2.0].sum()", 3.5),
    ("[].sum()", 0),
    ("object.l.sum() + 1", 12),
    ("[3, 1, 2].min()", 1),
    ("['b', 'a'].max()", "b"),
    ("object.l.max()", 5),
    ("[1, 2.5].max()", 2.5),
    # quantity
    ("quantity('1Gi').isGreaterThan(quantity('1000Mi'))", True),
    ("quantity('500m').isLessThan(quantity('1'))", True),
    ("quantity('500m').asApproximateFloat()", 0.5),
    ("quantity('1k').asInteger()", 1000),
    ("quantity('1.5').isInteger()", False),
    ("quantity('1e3').asInteger()", 1000),
    ("isQuantity('1e3')", True),
    ("isQuantity('1ki')", False),
    ("quantity('1') == quantity('1000m')", True),
    ("quantity('1').add(2).compareTo(quantity('3'))", 0),
    ("quantity('1').sub(quantity('2')).sign()", -1),
    ("quantity('50k').add(quantity('20')).sub(quantity('10k')).asInteger()", 40020),
    ("quantity('9223372036854775807').add(1).isInteger()", False),
    ("type(quantity('1')) == kubernetes.Quantity", True),
    # ip
    ("ip('10.0.0.1').family()", 4),
    ("ip('::1').isLoopback()", True),
    ("isIP('1.2.3.04')", False),
    ("isIP('fe80::1%eth0')", False),
    ("ip.isCanonical('2001:db8::1')", True),
    ("ip.isCanonical('2001:DB8::1')", False),
    ("ip('10.1.1.1').isGlobalUnicast()", True),
    ("ip('224.0.0.5').isLinkLocalMulticast()", True),
    ("ip('ff02::1').isLinkLocalMulticast()", True),
    ("ip('169.254.1.1').isLinkLocalUnicast()", True),
    ("ip('fe80::1').isLinkLocalUnicast()", True),
    ("ip('0.0.0.0').isUnspecified()", True),
    ("ip('255.255.255.255').isGlobalUnicast()", False),
    # cidr
    ("cidr('10.0.0.0/8').containsIP('10.1.2.3')", True),
    ("cidr('10.0.0.0/8').containsIP(ip('11.1.2.3'))", False),
    ("cidr('::1/128').containsIP('1.1.1.1')", False),
    ("cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')", True),
    ("cidr('10.1.0.0/16').containsCIDR(cidr('10.0.0.0/8'))", False),
    ("cidr('10.1.2.3/8').ip() == ip('10.1.2.3')", True),
    ("cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8')", True),
    ("cidr('2001:db8::/32').prefixLength()", 32),
    ("isCIDR('10.0.0.0/33')", False),
    ("isCIDR('10.0.0.0/8')", True),
]


@pytest.mark.parametrize(("source", "expected"), VALUES)
def test_library_values(source: str, expected: Any) -> None:
    assert evaluate(source) == expected


ERRORS = [
    ("[].min()", "min called on empty list"),
    ("object.m.sum()", "no such overload"),
    ("quantity('1.5').asInteger()", "cannot convert value to integer"),
    ("quantity('x')", FORMAT_WRONG),
    ("quantity('1ki')", SUFFIX),
    ("ip('::ffff:1.2.3.4')", 'IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed'),
    (
        "ip('x')",
        'IP Address "x" parse error during conversion from string: ParseAddr("x"): unable to parse IP',
    ),
    ("cidr('x')", 'network address parse error during conversion from string: netip.ParsePrefix("x")'),
]


@pytest.mark.parametrize(("source", "message"), ERRORS)
def test_library_errors(source: str, message: str) -> None:
    with pytest.raises(EvaluationError) as failure:
        evaluate(source)
    assert str(failure.value) == message


@pytest.mark.parametrize(
    "source",
    ["['a'].sum()", "quantity('1').add('x')", "ip('1.1.1.1').containsIP('1.1.1.1')"],
)
def test_wrong_arguments_are_refused_by_the_checker(source: str) -> None:
    with pytest.raises(CompileError, match="found no matching overload"):
        compile_expression(source, ["object"])


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Gi", "1073741824"),
        ("500m", "1/2"),
        ("1e3", "1000"),
        ("1E", "1000000000000000000"),
        ("-1.5Ki", "-1536"),
        ("12e-3", "3/250"),
        ("+3k", "3000"),
        ("1.", "1"),
        ("0", "0"),
        ("100u", "1/10000"),
    ],
)
def test_quantities_parse_as_apimachinery_reads_them(text: str, value: str) -> None:
    assert parse_quantity(text) == Fraction(value)


def test_quantities_finer_than_a_nano_round_up_away_from_zero() -> None:
    assert parse_quantity("0.1n") * 10**9 == 1
    assert parse_quantity("-0.1n") * 10**9 == -1
    assert parse_quantity("1e-20") * 10**9 == 1


def test_binary_quantities_are_capped_at_the_largest_int64() -> None:
    assert parse_quantity("16Ei") == 2**63 - 1


@pytest.mark.parametrize(
    ("text", "message"), [("", FORMAT_WRONG), ("abc", FORMAT_WRONG), ("1.2.3", FORMAT_WRONG), ("1ki", SUFFIX)]
)
def test_malformed_quantities(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as failure:
        parse_quantity(text)
    assert str(failure.value) == message


def test_a_library_value_from_one_evaluation_feeds_another() -> None:
    """What a policy's variables need: a Quantity out of one expression, into the next."""
    limit = compile_expression("quantity('2Gi')", []).evaluate({})
    check = compile_expression("variables.limit.isGreaterThan(quantity('1Gi'))", ["variables"])
    assert check.evaluate({"variables": {"limit": limit}}) is True
