"""Content types: parsing request bodies and encoding responses as kube-apiserver does."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
import yaml

from apiserver.machinery import errors, fastjson, gofmt, jsonsyntax, jsonvalue, mediatypes, offload

JSON_TYPE = mediatypes.JSON_TYPE
YAML_TYPE = mediatypes.YAML_TYPE
JSON_PATCH_TYPE = mediatypes.JSON_PATCH_TYPE
MERGE_PATCH_TYPE = mediatypes.MERGE_PATCH_TYPE
STRATEGIC_PATCH_TYPE = mediatypes.STRATEGIC_PATCH_TYPE
APPLY_PATCH_TYPE = mediatypes.APPLY_PATCH_TYPE
PROTOBUF_TYPE = mediatypes.PROTOBUF_TYPE

T = TypeVar("T")
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


@dataclass
class ParsedBody:
    value: Any
    # A YAML body's repeated keys, as yaml.v2's strict decoding words each: `line 5: key "name"
    # already set in map` (a JSON body's are kept by its jsonvalue.JSONObjects).
    yaml_duplicates: list[str] = field(default_factory=list)


EXCESSIVE_ALIASING = "error converting YAML to JSON: yaml: document contains excessive aliasing"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _key(key: Any) -> Any:
    return _LONE_SURROGATE.sub("\ufffd", key) if isinstance(key, str) else key


class _Normalizer:
    """One pass over a decoded body: bounds its depth and (expanded) size, and replaces lone
    UTF-16 surrogates with U+FFFD as Go's decoder does."""

    def __init__(self, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self.nodes = 0

    def walk(self, value: Any, depth: int = 0) -> Any:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise errors.bad_request(EXCESSIVE_ALIASING)
        if depth > MAX_DEPTH:
            raise errors.bad_request(f"the request body is nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, str):
            return _LONE_SURROGATE.sub("\ufffd", value)
        if isinstance(value, dict):
            pairs = [(_key(key), self.walk(item, depth + 1)) for key, item in jsonvalue.members(value)]
            return jsonvalue.from_pairs(pairs)
        if isinstance(value, list):
            return [self.walk(item, depth + 1) for item in value]
        return value


class MalformedJSONError(ValueError):
    """A body that is no JSON text; the message is Go's encoding/json error for it."""


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are no JSON; the message is made from the body (jsonsyntax).
    raise ValueError(name)


# Every ASCII digit as "0", every other byte as a space: a run of 19 digits is then found by a plain
# substring search, ten times faster than the regular expression [0-9]{19} (10 µs a 1.5 KB body).
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_RUN = b"0" * 19


def _has_long_number(body: bytes) -> bool:
    """Whether `body` holds 19 digits in a row (in a number or not: the careful decoder decides)."""
    return _LONG_RUN in body.translate(_DIGITS_AS_ZEROS)


def _depth_within(value: Any, most: int) -> bool:
    """Whether `value` nests at most `most` levels (a container is a level, as _Normalizer counts)."""
    pending = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if depth > most:
            return False
        if isinstance(item, dict):
            pending.extend((member, depth + 1) for member in item.values())
        elif isinstance(item, list):
            pending.extend((member, depth + 1) for member in item)
    return True


def _decode_plain_json(body: bytes) -> Any | None:
    """The body decoded by orjson when nothing in it needs the careful decoder: no `\\u` escape
    (so no lone surrogate), no number of 19 digits or more (orjson reads one past 64 bits as a
    float, Go and json.loads as the integer), no repeated key (the re-encoded text has as many
    quotes as the body: a repeated key would have lost at least its own two), not nested too deep.
    None otherwise, or where orjson refuses it (the careful decoder then says why in Go's words)."""
    if b"\\u" in body or _has_long_number(body):
        return None
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if orjson.dumps(value).count(b'"') != body.count(b'"'):
        return None
    if body.count(b"{") + body.count(b"[") > MAX_DEPTH and not _depth_within(value, MAX_DEPTH):
        return None
    return value


def decode_json(body: bytes) -> ParsedBody:
    """A JSON body decoded, or MalformedJSONError with Go's words for what is wrong with it (each
    caller wraps those as upstream's handler for it does)."""
    plain = _decode_plain_json(body)
    if plain is not None:
        return ParsedBody(plain)
    try:
        # Decoded as UTF-8 here: json.loads would also take UTF-16 and a byte order mark, as Go does not.
        text = body.decode("utf-8")
        value = json.loads(text, object_pairs_hook=jsonvalue.from_pairs, parse_constant=_reject_constant)
    except RecursionError:
        raise errors.bad_request(f"the request body is nested more than {MAX_DEPTH} levels deep") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedJSONError(jsonsyntax.syntax_error(body) or str(exc)) from None
    return ParsedBody(_Normalizer(max_nodes=len(body) + 1).walk(value))


def parse_json(body: bytes) -> ParsedBody:
    """A JSON object's body, as a create or update decodes it."""
    try:
        return decode_json(body)
    except MalformedJSONError as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from None


# libyaml's parser (as go-yaml's, a port of it) where PyYAML was built with it: about seven times
# faster than the pure-Python one, which stays the fallback.
_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[valid-type,misc]
    """YAML as sigs.k8s.io/yaml reads it for JSON: timestamps stay strings."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _go_sharp_v_key(key: Any) -> str:
    """%#v of a YAML map key as yaml.v2 decodes it (a string quoted, a number bare)."""
    if isinstance(key, str):
        return errors.go_quote(key)
    return gofmt.go_sharp_v(key)


class _YAMLDuplicates:
    """yaml.v2's strict check of a composed document: each repeated key of a mapping, reported on
    the line of its value, after whatever that value itself repeats (the order yaml.v2 decodes in),
    and again wherever an alias repeats the mapping. Read before construction, which expands merge
    keys (`<<`) in place."""

    def __init__(self, loader: _Loader, max_nodes: int) -> None:
        self.loader = loader
        self.found: list[str] = []
        self.budget = max_nodes

    def walk(self, node: yaml.Node) -> None:
        # Aliases are walked as often as they are used, so they are bounded as the body is.
        self.budget -= 1
        if self.budget < 0:
            raise errors.bad_request(EXCESSIVE_ALIASING)
        if isinstance(node, yaml.SequenceNode):
            for item in node.value:
                self.walk(item)
        elif isinstance(node, yaml.MappingNode):
            self._mapping(node)

    def _mapping(self, node: yaml.MappingNode) -> None:
        # Keyed by type too: yaml.v2 tells 1 from "1" and from 1.0 (a set alone would not).
        seen: set[tuple[type, Any]] = set()
        for key_node, value_node in node.value:
            self.walk(value_node)
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.loader.construct_object(key_node)
            if (type(key), key) in seen:
                line = value_node.start_mark.line + 1
                self.found.append(f"line {line}: key {_go_sharp_v_key(key)} already set in map")
            seen.add((type(key), key))


def _load_yaml(body: bytes) -> tuple[Any, list[str]]:
    loader = _Loader(body)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, []
        duplicates = _YAMLDuplicates(loader, max_nodes=len(body) + 1)
        duplicates.walk(node)
        return loader.construct_document(node), duplicates.found
    finally:
        loader.dispose()


def _sorted_keys(value: Any) -> Any:
    """sigs.k8s.io/yaml turns YAML into JSON through Go maps: every object's keys come out sorted."""
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


def parse_yaml(body: bytes) -> ParsedBody:
    try:
        value, duplicates = _load_yaml(body)
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
    return ParsedBody(_sorted_keys(value), duplicates)


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


async def off_loop(size: int, decode: Callable[[], T]) -> T:
    """`decode()` of an input of `size` bytes: in a worker thread when it is large, and so is
    every later step of the same request (machinery.offload)."""
    offload.note_input(size)
    return await offload.run(decode)


async def parse_body_off_loop(
    content_type: str, body: bytes, accepted: tuple[str, ...] = BODY_TYPES
) -> tuple[str, ParsedBody]:
    return await off_loop(len(body), lambda: parse_body(content_type, body, accepted))


async def decode_json_off_loop(body: bytes) -> ParsedBody:
    return await off_loop(len(body), lambda: decode_json(body))


def is_pretty(query_value: str | None, user_agent: str) -> bool:
    if query_value is not None:
        return query_value.lower() in ("1", "t", "true")
    agent = user_agent.lower()
    return agent.startswith("curl") or agent.startswith("wget")


def encode_json(value: Any, *, pretty: bool = False) -> bytes:
    if pretty:
        return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()
    return fastjson.dumps(value) + b"\n"


# Streamed lists go out in pieces of about this size.
LIST_CHUNK_BYTES = 256 * 1024
Item = tuple[Any, dict[str, bytes]]  # an object and its encodings by encoder name


def json_list_chunks(
    head: dict[str, Any], items: Iterable[Item], chunk_bytes: int = LIST_CHUNK_BYTES, *, pretty: bool = False
) -> Iterator[bytes]:
    """encode_json of the list `head` with `items` as its last member, in pieces of about
    `chunk_bytes`, each item encoded as it is reached. An item's compact JSON is taken from its
    encodings, or kept there for the next response that lists it."""
    if not pretty:
        encoded = (fastjson.kept(item, encodings) for item, encodings in items)
        return compact_json_list_chunks(head, encoded, chunk_bytes)
    empty = encode_json({**head, "items": []}, pretty=True)
    # Each item as encode_json indents it, two levels deeper (its strings hold no newlines).
    opening, separator = empty[: -len(b"[]\n}\n")] + b"[\n    ", b",\n    "
    pretty_items = (_pretty_item(item) for item, _ in items)
    return _list_chunks(empty, (opening, separator, b"\n  ]\n}\n"), pretty_items, chunk_bytes)


def compact_json_list_chunks(
    head: dict[str, Any], encoded: Iterable[bytes], chunk_bytes: int = LIST_CHUNK_BYTES
) -> Iterator[bytes]:
    """json_list_chunks of items given as their compact JSON."""
    empty = encode_json({**head, "items": []})
    return _list_chunks(empty, (empty[: -len(b"]}\n")], b",", b"]}\n"), iter(encoded), chunk_bytes)


def _list_chunks(
    empty: bytes, frame: tuple[bytes, bytes, bytes], encoded: Iterator[bytes], chunk_bytes: int
) -> Iterator[bytes]:
    """The list `empty` with the `encoded` items put in its frame (what opens them, what separates
    two, what closes them), in pieces of about `chunk_bytes`."""
    opening, separator, closing = frame
    first = next(encoded, None)
    if first is None:
        yield empty
        return
    parts, size = [opening, first], len(opening) + len(first)
    for item in encoded:
        parts += (separator, item)
        size += len(item) + len(separator)
        if size >= chunk_bytes:
            yield b"".join(parts)
            parts, size = [], 0
    parts.append(closing)
    yield b"".join(parts)


def _pretty_item(item: Any) -> bytes:
    return json.dumps(item, indent=2, ensure_ascii=False).replace("\n", "\n    ").encode()


def encode_json_list(head: dict[str, Any], items: Iterable[Item], *, pretty: bool = False) -> bytes:
    """json_list_chunks in one piece."""
    return b"".join(json_list_chunks(head, items, chunk_bytes=1 << 62, pretty=pretty))


def encode_yaml(value: Any) -> bytes:
    return yaml.safe_dump(value, default_flow_style=False, sort_keys=True, allow_unicode=True).encode()
