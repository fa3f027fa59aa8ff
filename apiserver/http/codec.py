"""Content types: parsing request bodies and encoding responses as kube-apiserver does."""

from __future__ import annotations

import json
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
    def __init__(self) -> None:
        self.duplicates: list[str] = []

    def hook(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result and key not in self.duplicates:
                self.duplicates.append(key)
            result[key] = value
        return result


@dataclass
class ParsedBody:
    value: Any
    duplicate_fields: list[str]


def _check_depth(value: Any, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise errors.bad_request(f"the request body is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, dict):
        for item in value.values():
            _check_depth(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_depth(item, depth + 1)


def parse_json(body: bytes) -> ParsedBody:
    tracker = _DuplicateTracker()
    try:
        value = json.loads(body, object_pairs_hook=tracker.hook)
    except RecursionError:
        raise errors.bad_request(f"the request body is nested more than {MAX_DEPTH} levels deep") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from None
    _check_depth(value)
    return ParsedBody(value, tracker.duplicates)


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
    _check_depth(value)
    try:
        # Round-trip through JSON: YAML-only values (bytes, sets, non-string keys) are refused.
        value = json.loads(json.dumps(value))
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
