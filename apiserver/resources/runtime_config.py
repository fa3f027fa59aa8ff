"""Which kinds are served: kube-apiserver's `--runtime-config`.

Its value is `key=value` pairs, comma-separated: `<group>/<version>=true|false` (a key alone means
true, a value is read as Go's strconv.ParseBool reads one) for one group version, and `api/all`,
`api/ga`, `api/beta` or `api/alpha` (`=true` or `=false`, given) for every version of that
stability. A group version's own pair wins over its stability's, which wins over api/all. As
upstream, alpha and beta versions are off unless enabled, GA ones (`v1`) on. coreio's GA kinds are
the server itself (authorization reads its RoleBindings), so they cannot be turned off; and where
upstream ignores a key naming a group it does not have, coreio refuses it, so that a misspelt
version is not silently left off.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from apiserver.resources.base import ResourceKind

_STABILITY = (
    ("ga", re.compile(r"v\d+")),
    ("beta", re.compile(r"v\d+beta\d+")),
    ("alpha", re.compile(r"v\d+alpha\d+")),
)
LEVELS = ("api/all", "api/ga", "api/beta", "api/alpha")
_PARSE_BOOL = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}


def stability(version: str) -> str:
    """ga, beta or alpha, by the version's name (v1, v1beta1, v1alpha1); "" for another name."""
    return next((name for name, pattern in _STABILITY if pattern.fullmatch(version)), "")


def parse(text: str) -> dict[str, bool]:
    """The pairs of `text`; ValueError for a value that is not one the key takes."""
    pairs: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sign, value = item.partition("=")
        if key in LEVELS:
            enabled = {"true": True, "false": False}.get(value)
        else:
            enabled = _PARSE_BOOL.get(value) if sign and value else True
        if enabled is None:
            raise ValueError(f"invalid value {key}={value}")
        pairs[key] = enabled
    return pairs


def enabled_kinds(kinds: Sequence[ResourceKind], text: str) -> tuple[ResourceKind, ...]:
    """The kinds `text` (a --runtime-config value) leaves served; ValueError for a key that names
    no group version of `kinds`, or that would turn a GA one off."""
    pairs = parse(text)
    known = {kind.api_version for kind in kinds}
    unknown = sorted(key for key in pairs if key not in known and key not in LEVELS)
    if unknown:
        raise ValueError(f"group version {', '.join(unknown)} that has not been registered")
    served = tuple(kind for kind in kinds if _enabled(kind, pairs))
    kept_off = sorted(
        {kind.api_version for kind in kinds if stability(kind.version) == "ga"}
        - {k.api_version for k in served}
    )
    if kept_off:
        raise ValueError(f"cannot disable {', '.join(kept_off)}: coreio always serves its GA versions")
    return served


def _enabled(kind: ResourceKind, pairs: dict[str, bool]) -> bool:
    """The group version's own pair, else its stability's, else api/all's, else the default."""
    level = f"api/{stability(kind.version)}"
    for key in (kind.api_version, level, "api/all"):
        if key in pairs:
            return pairs[key]
    return level == "api/ga"
