"""Who is asking: the user an authenticator establishes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

AUTHENTICATED_GROUP = "system:authenticated"
MASTERS_GROUP = "system:masters"


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """authentication/v1 UserInfo as JSON, its empty fields left out."""
        info: dict[str, Any] = {}
        if self.name:
            info["username"] = self.name
        if self.uid:
            info["uid"] = self.uid
        if self.groups:
            info["groups"] = list(self.groups)
        if self.extra:
            info["extra"] = {key: list(values) for key, values in self.extra.items()}
        return info

    def with_authenticated_group(self) -> UserInfo:
        """Every authenticated user is in system:authenticated, as upstream adds it."""
        if AUTHENTICATED_GROUP in self.groups:
            return self
        return UserInfo(self.name, self.uid, (*self.groups, AUTHENTICATED_GROUP), self.extra)
