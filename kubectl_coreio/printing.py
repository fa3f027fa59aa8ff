"""Output as kubectl prints it: tables with upper-case headers in columns padded as kubectl's
tabwriter pads them (at least 10 wide, 3 spaces between), `<none>` for nothing; or the answer
object as JSON or YAML (`-o json|yaml`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

import yaml

NONE = "<none>"
MIN_WIDTH = 10
PADDING = 3


def table(out: TextIO, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    lines = [list(headers), *([cell or NONE for cell in row] for row in rows)]
    widths = [max(MIN_WIDTH, max(len(line[i]) for line in lines) + PADDING) for i in range(len(headers))]
    for line in lines:
        cells = [cell.ljust(width) for cell, width in zip(line[:-1], widths, strict=False)]
        out.write("".join(cells) + line[-1] + "\n")


def document(out: TextIO, obj: Any, output: str) -> None:
    """`obj` as kubectl -o json (indented by 4) or -o yaml writes an object."""
    if output == "json":
        out.write(json.dumps(obj, indent=4, ensure_ascii=False) + "\n")
    else:
        out.write(yaml.safe_dump(obj, default_flow_style=False, sort_keys=True, allow_unicode=True))


def rule(rule: dict[str, Any]) -> str:
    """A rule in one cell: its verbs, then what they apply to (`[get list] events.events.core.io`,
    `[*] *.*`; resource names after a slash)."""
    verbs = "[" + " ".join(rule.get("verbs") or []) + "]"
    if rule.get("nonResourceURLs"):
        return f"{verbs} " + ",".join(rule["nonResourceURLs"])
    targets = []
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            targets.append(f"{resource}.{group}" if group else resource)
    names = rule.get("resourceNames") or []
    shown = ",".join(targets)
    return f"{verbs} {shown}/" + ",".join(names) if names else f"{verbs} {shown}"


def subject(entry: dict[str, Any], namespace: str = "") -> str:
    """A subject's name; a service account's as namespace/name (its binding's `namespace` when it
    names none)."""
    if entry.get("kind") == "ServiceAccount" and (entry.get("namespace") or namespace):
        return f"{entry.get('namespace') or namespace}/{entry.get('name', '')}"
    return str(entry.get("name", ""))


def reference(entry: dict[str, Any] | None) -> str:
    """`Kind/name` of a binding or role reference."""
    if not entry:
        return ""
    return f"{entry.get('kind', '')}/{entry.get('name', '')}"
