"""Semantic versions as upstream's semver library reads them (github.com/blang/semver/v4's Parse,
and the normalizing read of `semver(<string>, true)`), with its ordering and its error messages."""

from __future__ import annotations

from dataclasses import dataclass

_DIGITS = frozenset("0123456789")
_ALPHANUMERIC = _DIGITS | frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")
_MAX_UINT64 = 2**64 - 1


@dataclass(frozen=True)
class Version:
    """A version without its build metadata, which neither ordering nor equality looks at."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[int | str, ...] = ()

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        return f"{text}-{'.'.join(str(part) for part in self.prerelease)}" if self.prerelease else text


def _only(text: str, allowed: frozenset[str]) -> bool:
    return all(char in allowed for char in text)


def _uint64(text: str) -> int:
    """Go's strconv.ParseUint(text, 10, 64) of a string of ASCII digits (maybe empty)."""
    if not text:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    value = int(text)
    if value > _MAX_UINT64:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": value out of range')
    return value


def _number(text: str, name: str) -> int:
    if not _only(text, _DIGITS):
        raise ValueError(f"Invalid character(s) found in {name} number {_quote(text)}")
    if len(text) > 1 and text[0] == "0":
        raise ValueError(f"{name.capitalize()} number must not contain leading zeroes {_quote(text)}")
    return _uint64(text)


def _prerelease(text: str) -> int | str:
    if not text:
        raise ValueError("Prerelease is empty")
    if _only(text, _DIGITS):
        if len(text) > 1 and text[0] == "0":
            raise ValueError(f"Numeric PreRelease version must not contain leading zeroes {_quote(text)}")
        return _uint64(text)
    if not _only(text, _ALPHANUMERIC):
        raise ValueError(f"Invalid character(s) found in prerelease {_quote(text)}")
    return text


def _check_build(text: str) -> None:
    for part in text.split("."):
        if not part:
            raise ValueError("Build meta data is empty")
        if not _only(part, _ALPHANUMERIC):
            raise ValueError(f"Invalid character(s) found in build meta data {_quote(part)}")


def parse(text: str) -> Version:
    """`text` as a strict semantic version (`1.2.3-rc.1+build`); ValueError in blang's words."""
    if not text:
        raise ValueError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise ValueError("No Major.Minor.Patch elements found")
    major, minor = _number(parts[0], "major"), _number(parts[1], "minor")
    rest, plus, build = parts[2].partition("+")
    patch, dash, prerelease = rest.partition("-")
    patch_number = _number(patch, "patch")
    pre = tuple(_prerelease(part) for part in prerelease.split(".")) if dash else ()
    if plus:
        _check_build(build)
    return Version(major, minor, patch_number, pre)


def parse_normalized(text: str) -> Version:
    """`text` read leniently as upstream's normalizing read does: a leading `v` dropped, leading
    zeros dropped from the first three parts, missing minor and patch taken as 0."""
    parts = text.removeprefix("v").split(".", 2)
    parts = [_without_leading_zeros(part) for part in parts]
    if len(parts) < 3:
        if any(char in parts[-1] for char in "+-"):
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))


def _without_leading_zeros(part: str) -> str:
    if len(part) <= 1:
        return part
    trimmed = part.lstrip("0")
    return trimmed if trimmed and trimmed[0] in _DIGITS else "0" + trimmed


def compare(left: Version, right: Version) -> int:
    """-1, 0 or 1: semantic versioning's precedence (a prerelease sorts before its release)."""
    for a, b in ((left.major, right.major), (left.minor, right.minor), (left.patch, right.patch)):
        if a != b:
            return -1 if a < b else 1
    if not left.prerelease or not right.prerelease:
        return (not left.prerelease) - (not right.prerelease)
    for a_part, b_part in zip(left.prerelease, right.prerelease, strict=False):
        order = _compare_part(a_part, b_part)
        if order:
            return order
    return (len(left.prerelease) > len(right.prerelease)) - (len(left.prerelease) < len(right.prerelease))


def _compare_part(left: int | str, right: int | str) -> int:
    """Numbers before words; numbers by value, words by their bytes."""
    if isinstance(left, int) != isinstance(right, int):
        return -1 if isinstance(left, int) else 1
    a, b = (left, right) if isinstance(left, int) else (str(left).encode(), str(right).encode())
    return (a > b) - (a < b)  # type: ignore[operator]


def _quote(text: str) -> str:
    """Go's %q of `text`, for the characters a version may hold."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
