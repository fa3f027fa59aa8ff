"""Admission: the checks a write passes after decoding and before the kind's validation, in
upstream's order (the generic plugins that apply to every kind first, then the kind's own)."""

from __future__ import annotations

from collections.abc import Iterable

from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo
from apiserver.resources.base import Admission


def chained(admissions: Iterable[Admission | None]) -> Admission | None:
    """One admission running each given one in turn (None when there is none)."""
    steps = [step for step in admissions if step is not None]
    if len(steps) <= 1:
        return steps[0] if steps else None

    async def admit(user: UserInfo | None, namespace: str, obj: JSON, old: JSON | None) -> None:
        for step in steps:
            await step(user, namespace, obj, old)

    return admit
