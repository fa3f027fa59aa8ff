"""Objects from a manifest file, as kubectl reads one: YAML or JSON, single objects,
`---`-separated documents, a plain list, or a List (kind List, <Kind>List) with items."""

from __future__ import annotations

from typing import Any

import yaml


class ManifestError(ValueError):
    """A file that is no manifest; the message names the file and what is wrong."""


def manifest_items(text: str, where: str) -> list[Any]:
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        raise ManifestError(f"{where}: {exc}") from exc
    items: list[Any] = []
    for doc in documents:
        if isinstance(doc, list):
            items.extend(doc)
        elif (
            isinstance(doc, dict)
            and isinstance(doc.get("items"), list)
            and str(doc.get("kind", "")).endswith("List")
        ):
            items.extend(doc["items"])
        else:
            items.append(doc)
    return items
