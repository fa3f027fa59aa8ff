"""Which Events an export sends: its namespaces, then its match and drop rules (each field a
regular expression, searched, as kubernetes-event-exporter's routes), and with `series: Changes`
no record for a series' heartbeat."""

from __future__ import annotations

from collections import OrderedDict

import orjson

from apiserver.machinery.regexp import compile_go
from apiserver.machinery.types import JSON
from apiserver.resources.eventexport import ALL_NAMESPACES, EventExportSpec, Rule

HEARTBEATS_REMEMBERED = 10_000  # series whose last record is remembered (bounded memory)
# What a heartbeat changes (events.k8s.io: the series' count and last observed time), and what
# every write changes; an update that changes nothing else is a heartbeat.
_VOLATILE_META = ("resourceVersion", "managedFields", "generation")


class _CompiledRule:
    def __init__(self, rule: Rule) -> None:
        fields = {
            "type": rule.type,
            "reason": rule.reason,
            "regardingKind": rule.regardingKind,
            "regardingName": rule.regardingName,
            "reportingController": rule.reportingController,
            "note": rule.note,
        }
        self.fields = [(field, compile_go(pattern)) for field, pattern in fields.items() if pattern]
        self.labels = [(key, compile_go(pattern)) for key, pattern in rule.labels.items()]

    def matches(self, event: JSON) -> bool:
        for field, pattern in self.fields:
            if pattern.search(_field(event, field)) is None:
                return False
        labels = event.get("metadata", {}).get("labels") or {}
        return all(key in labels and pattern.search(labels[key]) is not None for key, pattern in self.labels)


def _field(event: JSON, field: str) -> str:
    if field == "regardingKind":
        value = (event.get("regarding") or {}).get("kind", "")
    elif field == "regardingName":
        value = (event.get("regarding") or {}).get("name", "")
    else:
        value = event.get(field, "")
    return value if isinstance(value, str) else ""


class Selection:
    """The export's choice of Events."""

    def __init__(self, spec: EventExportSpec, own_namespace: str) -> None:
        names = spec.namespaces or [own_namespace]
        self.namespaces: frozenset[str] | None = None if names == [ALL_NAMESPACES] else frozenset(names)
        self.match = [_CompiledRule(rule) for rule in spec.match]
        self.drop = [_CompiledRule(rule) for rule in spec.drop]
        self.changes_only = spec.series == "Changes"
        self._series: OrderedDict[str, bytes] = OrderedDict()

    @property
    def watched_namespace(self) -> str:
        """The one namespace to watch, or "" to watch every namespace (and keep those asked)."""
        return (
            next(iter(self.namespaces)) if self.namespaces is not None and len(self.namespaces) == 1 else ""
        )

    def wants(self, change: str, event: JSON) -> bool:
        """Whether a watch event (`change`: ADDED, MODIFIED, DELETED) of `event` is exported."""
        if self.namespaces is not None and event.get("metadata", {}).get("namespace") not in self.namespaces:
            return False
        if self.match and not any(rule.matches(event) for rule in self.match):
            return False
        if any(rule.matches(event) for rule in self.drop):
            return False
        return not (self.changes_only and self._heartbeat(change, event))

    def _heartbeat(self, change: str, event: JSON) -> bool:
        uid = event.get("metadata", {}).get("uid", "")
        if change == "DELETED":
            self._series.pop(uid, None)
            return False
        shape = _shape(event)
        before = self._series.pop(uid, None)
        self._series[uid] = shape
        if len(self._series) > HEARTBEATS_REMEMBERED:
            self._series.popitem(last=False)
        return change == "MODIFIED" and isinstance(event.get("series"), dict) and before == shape


def _shape(event: JSON) -> bytes:
    """The Event without what a heartbeat moves on."""
    meta = {k: v for k, v in event.get("metadata", {}).items() if k not in _VOLATILE_META}
    rest = {k: v for k, v in event.items() if k not in ("metadata", "series")}
    return orjson.dumps([meta, rest], option=orjson.OPT_SORT_KEYS)
