"""What server-side printing needs from a kind: column definitions and the human-readable cells of
kube-apiserver's printers (k8s.io/kubernetes pkg/printers), ages as apimachinery's
duration.HumanDuration writes them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from apiserver.machinery.types import JSON

_SECOND = 10**9
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE
_DAY_HOURS = 24
_YEAR_HOURS = 365 * _DAY_HOURS
UNKNOWN_TIME = "<unknown>"
_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class TableColumn:
    """One metav1.TableColumnDefinition. `priority` 0 columns are always shown; 1 only with -o wide."""

    name: str
    type: str
    description: str
    format: str = ""
    priority: int = 0

    def definition(self) -> JSON:
        # Every field is written, empty or not, as upstream's JSON tags have no omitempty.
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


def field_description(model: type[BaseModel], name: str) -> str:
    """The description a model gives one of its fields (the text OpenAPI serves for it)."""
    return model.model_fields[name].description or ""


def _truncated_seconds(nanoseconds: int) -> int:
    # Go's int(d.Seconds()) truncates toward zero.
    return nanoseconds // _SECOND if nanoseconds >= 0 else -((-nanoseconds) // _SECOND)


def human_duration(nanoseconds: int) -> str:
    """duration.HumanDuration: two or three significant figures, e.g. 70s, 3m10s, 2d1h, 2y1d."""
    seconds = _truncated_seconds(nanoseconds)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 2 * 60:
        return f"{seconds}s"
    minutes = nanoseconds // _MINUTE
    if minutes < 10:
        rest = (nanoseconds // _SECOND) % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 3 * 60:
        return f"{minutes}m"
    hours = nanoseconds // _HOUR
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 2 * _DAY_HOURS:
        return f"{hours}h"
    days = hours // _DAY_HOURS
    if hours < 8 * _DAY_HOURS:
        rest = hours % _DAY_HOURS
        return f"{days}d" if rest == 0 else f"{days}d{rest}h"
    if hours < 2 * _YEAR_HOURS:
        return f"{days}d"
    years = hours // _YEAR_HOURS
    if hours < 8 * _YEAR_HOURS:
        rest = days % 365
        return f"{years}y" if rest == 0 else f"{years}y{rest}d"
    return f"{years}y"


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 Time or MicroTime, or None for a missing (zero) or unreadable one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    # Go's zero time is how an unset timestamp reads back.
    return None if parsed == _ZERO_TIME else parsed


def rfc3339(value: Any) -> str:
    """A timestamp as Go's time.RFC3339 layout writes it in UTC (the zero time when unset)."""
    t = (parse_time(value) or _ZERO_TIME).astimezone(UTC)
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}Z"


def since(value: Any, now: datetime) -> str:
    """translateTimestampSince / translateMicroTimestampSince: the age of a timestamp, or
    `<unknown>` when it is unset."""
    then = parse_time(value)
    if then is None:
        return UNKNOWN_TIME
    delta = now - then
    micros = (delta.days * 86400 + delta.seconds) * 10**6 + delta.microseconds
    return human_duration(micros * 1000)
