"""Small helpers over the `metadata` of plain-dict objects, and the API's time formats."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime

from apiserver.machinery.types import JSON

# What upstream's names.SimpleNameGenerator draws from: no vowels, no confusable characters.
_GENERATED_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATED_SUFFIX_LENGTH = 5
_MAX_GENERATED_NAME_LENGTH = 63 - _GENERATED_SUFFIX_LENGTH
# Upstream draws from math/rand (utilrand.String), not a cryptographic source: a generated name
# is unique by the create that checks it, not unguessable. The system's random source cost a
# system call a character (py-spy: 2% of a create with generateName). The random module's own
# generator, which Python seeds again in each forked worker (an instance would draw the same names
# in every worker).


class _Clock:
    """The current second's metav1.Time text."""

    def __init__(self) -> None:
        self.second = -1
        self.text = ""


_CLOCK = _Clock()


def now_text() -> str:
    """format_time(now()), formatted once a second rather than at each call (strftime and the
    datetime around it were 2% of a create's time, py-spy)."""
    second = int(time.time())
    if second != _CLOCK.second:
        _CLOCK.text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
        _CLOCK.second = second
    return _CLOCK.text


def format_time(moment: datetime) -> str:
    """metav1.Time: RFC 3339 in whole seconds, UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(moment: datetime) -> str:
    """metav1.MicroTime: RFC 3339 with exactly six fraction digits, UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def metadata(obj: JSON) -> JSON:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def generate_name(base: str) -> str:
    if len(base) > _MAX_GENERATED_NAME_LENGTH:
        base = base[:_MAX_GENERATED_NAME_LENGTH]
    suffix = "".join(random.choices(_GENERATED_ALPHABET, k=_GENERATED_SUFFIX_LENGTH))
    return base + suffix
