"""What a sink receives for each exported change of an Event: a record carrying the change, the
Event as stored and a dedup key (uid and resourceVersion), unique per change, so a sink can drop
the one batch an exporter's restart may send again."""

from __future__ import annotations

from apiserver.machinery.types import JSON

EVENTS_PATH = "/apis/events.core.io/v1"
CLOUDEVENT_TYPE = "io.core.events.v1.event"


def record(change: str, event: JSON) -> JSON:
    """{"dedupKey", "type" (ADDED, MODIFIED or DELETED), "resourceVersion", "event"}"""
    meta = event.get("metadata", {})
    version = meta.get("resourceVersion", "")
    return {
        "dedupKey": f"{meta.get('uid', '')}/{version}",
        "type": change,
        "resourceVersion": version,
        "event": event,
    }


def cloud_event(item: JSON) -> JSON:
    """A record as a CloudEvent 1.0 in structured mode: its id the dedup key, its source the
    Event's path, its type the change, its data the Event."""
    event = item["event"]
    meta = event.get("metadata", {})
    regarding = event.get("regarding") or {}
    out: JSON = {
        "specversion": "1.0",
        "id": item["dedupKey"],
        "source": f"{EVENTS_PATH}/namespaces/{meta.get('namespace', '')}/events/{meta.get('name', '')}",
        "type": f"{CLOUDEVENT_TYPE}.{item['type'].lower()}",
        "datacontenttype": "application/json",
        "data": event,
    }
    time = event.get("eventTime") or meta.get("creationTimestamp")
    if time:
        out["time"] = time
    if regarding.get("kind") and regarding.get("name"):
        out["subject"] = f"{regarding['kind']}/{regarding['name']}"
    return out
