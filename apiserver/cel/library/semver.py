"""Kubernetes' semver library (version 1, as the admission environment has it since 1.33):
semver(<string>[, <normalize>]), isSemver(<string>[, <normalize>]), major, minor, patch. The
comparisons (isGreaterThan, isLessThan, compareTo) are declared with the Quantity's, in ordering.py."""

from __future__ import annotations

from typing import Any

from cel_expr_python import cel

from apiserver.cel.library import versions
from apiserver.cel.library.types import SEMVER_TYPE, Semver

T = cel.Type


def version_of(semver: Any) -> versions.Version:
    return versions.parse(semver.value)


def compare(left: Any, right: Any) -> int:
    return versions.compare(version_of(left), version_of(right))


def _read(text: str, normalize: bool) -> versions.Version:
    return versions.parse_normalized(text) if normalize else versions.parse(text)


def _semver(text: str, normalize: bool = False) -> Any:
    return Semver(value=str(_read(text, normalize)))


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _read(text, normalize)
    except ValueError:
        return False
    return True


def _int64(value: int) -> int:
    """Go's int64(v) of a uint64: the largest numbers wrap to negative ones, as upstream's do."""
    return value - 2**64 if value >= 2**63 else value


def _part(name: str) -> Any:
    def part(semver: Any) -> int:
        return _int64(getattr(version_of(semver), name))

    return cel.FunctionDecl(
        name, [cel.Overload(f"semver_{name}", T.INT, [SEMVER_TYPE], is_member=True, impl=part)]
    )


FUNCTIONS = (
    cel.FunctionDecl(
        "semver",
        [
            cel.Overload("string_to_semver", SEMVER_TYPE, [T.STRING], impl=_semver),
            cel.Overload("string_bool_to_semver", SEMVER_TYPE, [T.STRING, T.BOOL], impl=_semver),
        ],
    ),
    cel.FunctionDecl(
        "isSemver",
        [
            cel.Overload("is_semver_string", T.BOOL, [T.STRING], impl=_is_semver),
            cel.Overload("is_semver_string_bool", T.BOOL, [T.STRING, T.BOOL], impl=_is_semver),
        ],
    ),
    _part("major"),
    _part("minor"),
    _part("patch"),
)
