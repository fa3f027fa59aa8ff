"""Reading a live audit log as a tailer does: the server may be writing its last line while a test
reads (a request's ResponseComplete comes after its answer), so only whole lines count; the rest is
read next time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def logged_events(path: Path) -> list[dict[str, Any]]:
    """The audit events of every line of `path` already written whole."""
    text = path.read_bytes()
    whole = text[: text.rfind(b"\n") + 1]
    return [json.loads(line) for line in whole.splitlines()]
