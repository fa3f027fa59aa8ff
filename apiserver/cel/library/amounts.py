"""Kubernetes resource quantities ("1Gi", "500m", "1e3") read as exact fractions, with
apimachinery's resource.ParseQuantity rules and error messages."""

from __future__ import annotations

import re
from fractions import Fraction

_FORMAT = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
FORMAT_WRONG = f"quantities must match the regular expression '{_FORMAT}'"
NUMERIC = "unable to parse numeric part of quantity"
SUFFIX = "unable to parse quantity's suffix"

# Sign, whole digits, an optional fraction, then the suffix: its letters, a sign, digits.
_SHAPE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[-+]?[0-9]*)", re.ASCII)
_DECIMAL = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_EXPONENT = re.compile(r"[eE]([-+]?[0-9]+)", re.ASCII)
# Beyond these exponents the value is only ever capped or rounded; Python would build huge numbers.
_MAX_EXPONENT = 1_000
NANO = Fraction(1, 10**9)
MAX_INT64 = 2**63 - 1


class QuantityError(ValueError):
    """A string that is no quantity; the message is apimachinery's."""


def _multiplier(suffix: str) -> tuple[Fraction, bool]:
    """The suffix's factor, and whether it is binary (Ki, Mi, ...)."""
    if suffix in _DECIMAL:
        return Fraction(10) ** _DECIMAL[suffix], False
    if suffix in _BINARY:
        return Fraction(2 ** _BINARY[suffix]), True
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent is None:
        raise QuantityError(SUFFIX)
    power = int(exponent.group(1))
    if power > _MAX_EXPONENT:
        raise QuantityError(NUMERIC)
    return Fraction(10) ** max(power, -_MAX_EXPONENT), False


def _round_up_to_nano(value: Fraction) -> Fraction:
    """Away from zero to the next nano: a request for any amount gets some."""
    scaled = value / NANO
    whole = -((-abs(scaled).numerator) // abs(scaled).denominator)
    return Fraction(whole if value > 0 else -whole) * NANO


def parse_quantity(text: str) -> Fraction:
    """The quantity `text` names, exactly; QuantityError when it names none."""
    shape = _SHAPE.fullmatch(text)
    if not text or shape is None:
        raise QuantityError(FORMAT_WRONG)
    sign, whole, fraction, suffix = shape.groups()
    fraction = fraction or ""
    multiplier, binary = _multiplier(suffix)
    value = Fraction(int(whole + fraction or "0"), 10 ** len(fraction)) * multiplier
    if sign == "-":
        value = -value
    if value.denominator != 1:
        value = _round_up_to_nano(value)
    if binary and abs(value) > MAX_INT64:
        value = Fraction(MAX_INT64 if value > 0 else -MAX_INT64)
    return value


def encode(value: Fraction) -> str:
    """The canonical text of an exact amount ("3/2"), the key of equality between quantities."""
    return f"{value.numerator}/{value.denominator}"


def decode(text: str) -> Fraction:
    return Fraction(text)
