"""One module per served kind. `KINDS` are the kinds served by default; `SERVABLE_KINDS` adds the
alpha ones, served once `--runtime-config` enables them (`runtime_config`)."""

from __future__ import annotations

from apiserver.resources.base import ResourceKind
from apiserver.resources.event import EventKind
from apiserver.resources.eventexport import EventExportKind
from apiserver.resources.rolebinding import RoleBindingKind

KINDS: tuple[ResourceKind, ...] = (RoleBindingKind(), EventKind())
SERVABLE_KINDS: tuple[ResourceKind, ...] = (*KINDS, EventExportKind())

__all__ = ["KINDS", "SERVABLE_KINDS", "EventExportKind", "EventKind", "ResourceKind", "RoleBindingKind"]
