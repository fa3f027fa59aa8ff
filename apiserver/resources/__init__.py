"""One module per served kind; `KINDS` lists the kinds the server serves."""

from __future__ import annotations

from apiserver.resources.base import ResourceKind
from apiserver.resources.event import EventKind
from apiserver.resources.rolebinding import RoleBindingKind

KINDS: tuple[ResourceKind, ...] = (RoleBindingKind(), EventKind())

__all__ = ["KINDS", "EventKind", "ResourceKind", "RoleBindingKind"]
