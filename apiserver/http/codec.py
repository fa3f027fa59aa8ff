"""Content types: parsing request bodies and encoding responses as kube-apiserver does."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import yaml

from apiserver import errors

JSON_TYPE = "application/json"
YAML_TYPE = "application/yaml"
JSON_PATCH_TYPE = "application/json-patch+json"
MERGE_PATCH_TYPE = "application/merge-patch+json"
STRATEGIC_PATCH_TYPE = "application/strategic-merge-patch+json"
APPLY_PATCH_TYPE = "application/apply-patch+yaml"
PROTOBUF_TYPE = "application/vnd.kubernetes.protobuf"

BODY_TYPES = (JSON_TYPE, YAML_TYPE)
PATCH_TYPES = (JSON_PATCH_TYPE, MERGE_PATCH_TYPE, APPLY_PATCH_TYPE, STRATEGIC_PATCH_TYPE)
# Most deeply nested a request body may be (upstream's JSON decoder caps depth at 10000; ours is
# far lower because no valid object of these kinds nests more than a handful of levels).
MAX_DEPTH = 100


@dataclass(frozen=True)
class MediaType:
    type: str
    params: dict[str, str]

    @property
    def essence(self) -> str:
        return self.type


def parse_media_type(value: str) -> MediaType:
    parts = [p.strip() for p in value.split(";")]
    params: dict[str, str] = {}
    for part in parts[1:]:
        if "=" in part:
            k, _, v = part.partition("=")
            params[k.strip().lower()] = v.strip().strip('"')
    return MediaType(parts[0].lower(), params)


def parse_accept(header: str) -> list[MediaType]:
    """Accept header entries in preference order (q-values honoured, stable otherwise)."""
    entries: list[tuple[float, int, MediaType]] = []
    for index, raw in enumerate(header.split(",")):
        raw = raw.strip()
        if not raw:
            continue
        media = parse_media_type(raw)
        try:
            quality = float(media.params.pop("q", "1"))
        except ValueError:
            quality = 1.0
        if quality > 0:
            entries.append((-quality, index, media))
    entries.sort(key=lambda e: (e[0], e[1]))
    return [e[2] for e in entries]


class _DuplicateTracker:
    """Remembers duplicate keys by the object they were found in, to name them by path later."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []

    def hook(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                self.found.append((id(result), key))
            result[key] = value
        return result


@dataclass
class ParsedBody:
    value: Any
    # JSON paths of keys given twice (`metadata.labels.a`); the last value won.
    duplicate_fields: list[str]


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class _Normalizer:
    """One pass over a decoded body: bounds its depth and (expanded) size, replaces lone UTF-16
    surrogates with U+FFFD as Go's decoder does, and records each object's JSON path."""

    def __init__(self, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self.nodes = 0
        self.paths: dict[int, str] = {}

    def walk(self, value: Any, path: str = "", depth: int = 0) -> Any:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise errors.bad_request(
                "error converting YAML to JSON: yaml: document contains excessive aliasing"
            )
        if depth > MAX_DEPTH:
            raise errors.bad_request(f"the request body is nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, str):
            return _LONE_SURROGATE.sub("\ufffd", value)
        if isinstance(value, dict):
            self.paths[id(value)] = path
            out: dict[str, Any] = {}
            for key, item in value.items():
                if isinstance(key, str):
                    key = _LONE_SURROGATE.sub("\ufffd", key)
                out[key] = self.walk(item, f"{path}.{key}" if path else str(key), depth + 1)
            self.paths[id(out)] = path
            return out
        if isinstance(value, list):
            return [self.walk(item, f"{path}[{index}]", depth + 1) for index, item in enumerate(value)]
        return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid character '{name[0]}' looking for beginning of value")


def parse_json(body: bytes) -> ParsedBody:
    tracker = _DuplicateTracker()
    try:
        value = json.loads(body, object_pairs_hook=tracker.hook, parse_constant=_reject_constant)
    except RecursionError:
        raise errors.bad_request(f"the request body is nested more than {MAX_DEPTH} levels deep") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from None
    normalizer = _Normalizer(max_nodes=len(body) + 1)
    normalized = normalizer.walk(value)
    duplicates: list[str] = []
    for container_id, key in tracker.found:
        parent = normalizer.paths.get(container_id, "")
        path = f"{parent}.{key}" if parent else key
        if path not in duplicates:
            duplicates.append(path)
    return ParsedBody(normalized, duplicates)


class _Loader(yaml.SafeLoader):
    """YAML as sigs.k8s.io/yaml reads it for JSON: timestamps stay strings."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_yaml(body: bytes) -> ParsedBody:
    try:
        value = yaml.load(body, Loader=_Loader)
    except RecursionError:
        raise errors.bad_request(f"the request body is nested more than {MAX_DEPTH} levels deep") from None
    except yaml.YAMLError as exc:
        raise errors.bad_request(f"error converting YAML to JSON: {exc}") from None
    # Aliases let a few bytes stand for a huge tree (CVE-2019-11253): without them a document has
    # fewer nodes than bytes, so more nodes than bytes means excessive aliasing.
    value = _Normalizer(max_nodes=len(body) + 1).walk(value)
    try:
        # Round-trip through JSON: YAML-only values (bytes, sets, non-string keys) are refused.
        value = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise errors.bad_request(f"error converting YAML to JSON: {exc}") from None
    return ParsedBody(value, [])


def parse_body(
    content_type: str, body: bytes, accepted: tuple[str, ...] = BODY_TYPES
) -> tuple[str, ParsedBody]:
    """Decodes a request body by its Content-Type; an empty Content-Type means JSON."""
    media = parse_media_type(content_type).type if content_type else JSON_TYPE
    if media not in accepted:
        raise errors.unsupported_media_type(list(accepted))
    if media in (YAML_TYPE, APPLY_PATCH_TYPE):
        return media, parse_yaml(body)
    return media, parse_json(body)


def is_pretty(query_value: str | None, user_agent: str) -> bool:
    if query_value is not None:
        return query_value.lower() in ("1", "t", "true")
    agent = user_agent.lower()
    return agent.startswith("curl") or agent.startswith("wget")


def encode_json(value: Any, *, pretty: bool = False) -> bytes:
    if pretty:
        return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()
    return (json.dumps(value, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def encode_yaml(value: Any) -> bytes:
    return yaml.safe_dump(value, default_flow_style=False, sort_keys=True, allow_unicode=True).encode()
