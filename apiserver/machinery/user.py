"""Who is asking: the user an authenticator establishes."""

from __future__ import annotations

from dataclasses import dataclass, field

AUTHENTICATED_GROUP = "system:authenticated"
MASTERS_GROUP = "system:masters"


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def with_authenticated_group(self) -> UserInfo:
        """Every authenticated user is in system:authenticated, as upstream adds it."""
        if AUTHENTICATED_GROUP in self.groups:
            return self
        return UserInfo(self.name, self.uid, (*self.groups, AUTHENTICATED_GROUP), self.extra)
