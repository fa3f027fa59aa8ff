"""Which kinds are served: kube-apiserver's `--runtime-config`.

Its value is `key=value` pairs, comma-separated: `<group>/<version>=true|false` for one group
version, `api/all`, `api/ga`, `api/beta` or `api/alpha` for every version (of that stability); a
key alone means true. A group version's own pair wins over its stability's, which wins over
api/all. As upstream, alpha and beta versions are off unless enabled, GA ones on unless disabled.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from apiserver.resources.base import ResourceKind

_STABILITY = (("alpha", re.compile(r"v\d+alpha\d+")), ("beta", re.compile(r"v\d+beta\d+")))
_TRUE = {"true": True, "false": False}


def stability(version: str) -> str:
    """ga, beta or alpha, by the version's name (v1, v1beta1, v1alpha1)."""
    return next((name for name, pattern in _STABILITY if pattern.fullmatch(version)), "ga")


def parse(text: str) -> dict[str, bool]:
    """The pairs of `text`, in order; ValueError for one that is not key[=true|false]."""
    pairs: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sign, value = item.partition("=")
        enabled = _TRUE.get(value.strip().lower()) if sign else True
        if enabled is None or not key.strip():
            raise ValueError(f"invalid value of {item}: must be <group>/<version>[=true|false] or api/all")
        pairs[key.strip()] = enabled
    return pairs


def enabled_kinds(kinds: Sequence[ResourceKind], text: str) -> tuple[ResourceKind, ...]:
    """The kinds `text` (a --runtime-config value) leaves served; ValueError naming a key that is
    neither api/<stability> nor a group version of `kinds`."""
    pairs = parse(text)
    known = {kind.api_version for kind in kinds}
    levels = {"api/all", "api/ga", "api/beta", "api/alpha"}
    unknown = sorted(key for key in pairs if key not in known | levels)
    if unknown:
        raise ValueError(f"unknown api groups {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return tuple(kind for kind in kinds if _enabled(kind, pairs))


def _enabled(kind: ResourceKind, pairs: dict[str, bool]) -> bool:
    """The group version's own pair, else its stability's, else api/all's, else the default."""
    level = f"api/{stability(kind.version)}"
    for key in (kind.api_version, level, "api/all"):
        if key in pairs:
            return pairs[key]
    return level == "api/ga"
