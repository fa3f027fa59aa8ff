"""Encoding responses: output negotiation (JSON, YAML, and the Table and PartialObjectMetadata
transformations), pretty printing, gzip, warnings, Status bodies."""

from __future__ import annotations

import asyncio
import gzip
import json
import unicodedata
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from apiserver.http import codec, table
from apiserver.machinery import errors
from apiserver.machinery.memory import release_free_memory
from apiserver.registry.decoded import ObjectList
from apiserver.resources.base import ResourceKind

NO_CACHE = "no-cache, private"
# Where the resource handlers record the kind a request is about; responses to such requests may
# be transformed (Table, PartialObjectMetadata), as kube-apiserver's resource endpoints allow.
RESOURCE_KIND_KEY = web.RequestKey("resource_kind", ResourceKind)
# Upstream's defaultGzipThresholdBytes: smaller bodies go out uncompressed whatever the client asks.
GZIP_THRESHOLD_BYTES = 128 * 1024
# Upstream's gzip writers compress at level 1 (speed over size).
GZIP_LEVEL = 1
# Lists whose objects take more than this (stored) are streamed.
STREAM_LIST_BYTES = 1024 * 1024
# After a list this large is written, the memory its encoding took (malloc's, freed between objects
# that stay, such as a watch cache's values packed meanwhile) is handed back (machinery/memory.py):
# a server restarted on 100,000 Events and listing them all while its caches packed held 385 MiB
# after, 254 MiB with this (`python -m bench.restart --memory --shape cluster`). 64 MiB is about
# 35,000 Events, hundreds of milliseconds to list; a trim takes 5-20 ms, in a thread.
RELEASE_AFTER_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class OutputFormat:
    media_type: str  # application/json or application/yaml
    # The meta.k8s.io kind to convert the response to (Table, PartialObjectMetadata[List]), if any.
    target: table.Target | None = None
    # `pretty=1` in the Accept entry.
    pretty: bool = False

    @property
    def is_yaml(self) -> bool:
        return self.media_type == codec.YAML_TYPE


JSON_OUTPUT = OutputFormat(codec.JSON_TYPE)
YAML_OUTPUT = OutputFormat(codec.YAML_TYPE)
# What the server encodes, in upstream's order: a wildcard picks the first. Protobuf is listed (and
# named in 406s) as kube-apiserver lists it, but never chosen: a client listing it first and JSON
# after gets JSON.
_SERVED = (codec.JSON_TYPE, codec.YAML_TYPE, codec.PROTOBUF_TYPE)
_ENCODED = (codec.JSON_TYPE, codec.YAML_TYPE)
_OFFERED = list(_SERVED)
_OFFERED_STREAMS = [f"{codec.JSON_TYPE};stream=watch", f"{codec.PROTOBUF_TYPE};stream=watch"]
# The version of meta.k8s.io that resource endpoints accept in `sv=`.
_SERVER_VERSION = "v1"


def _matches(pattern: str, media_type: str) -> bool:
    if pattern in ("*", "*/*"):
        return True
    kind, _, sub = pattern.partition("/")
    return pattern == media_type or (sub == "*" and media_type.startswith(kind + "/"))


def _accepted(params: dict[str, str], media_type: str, transforms: bool) -> OutputFormat | None:
    """The format one Accept entry asks of one served media type, or None when the endpoint cannot
    serve what its parameters ask (negotiation then moves on to the next candidate)."""
    target: table.Target | None = None
    if any(key in params for key in ("as", "g", "v")):
        target = table.Target(params.get("as", ""), params.get("g", ""), params.get("v", ""))
    stream = params.get("stream", "")
    if stream and (stream != "watch" or media_type != codec.JSON_TYPE):
        return None
    server_version = params.get("sv", "")
    if server_version and not (transforms and server_version == _SERVER_VERSION):
        return None
    if target is not None and not (transforms and target.served_as(media_type)):
        return None
    if media_type not in _ENCODED:
        return None
    return OutputFormat(media_type, target, params.get("pretty") == "1")


def negotiate(accept: str, *, transforms: bool = False) -> OutputFormat:
    """Picks the response format as upstream's NegotiateMediaTypeOptions does: Accept entries in
    preference order, each tried against the served types in the server's order. Transformations
    (`as=Table;g=meta.k8s.io;v=v1`) count only where `transforms` (resource endpoints); elsewhere an
    entry asking for one is skipped. Nothing acceptable: 406."""
    if not accept.strip():
        return JSON_OUTPUT
    for media in codec.parse_accept(accept):
        for served in _SERVED:
            if _matches(media.type, served):
                fmt = _accepted(media.params, served, transforms)
                if fmt is not None:
                    return fmt
    raise errors.not_acceptable(_OFFERED)


def negotiate_stream(accept: str) -> OutputFormat:
    """A watch's format: negotiated as any response of a resource endpoint, then it must be one
    that streams (JSON; YAML has no stream framing)."""
    fmt = negotiate(accept, transforms=True)
    if fmt.media_type != codec.JSON_TYPE:
        raise errors.not_acceptable(_OFFERED_STREAMS)
    return fmt


def _pretty(request: web.Request, fmt: OutputFormat) -> bool:
    return fmt.pretty or codec.is_pretty(request.query.get("pretty"), request.headers.get("User-Agent", ""))


def encode(request: web.Request, body: Any, fmt: OutputFormat) -> bytes:
    if fmt.is_yaml:
        return codec.encode_yaml(body)
    return codec.encode_json(body, pretty=_pretty(request, fmt))


def accepts_gzip(request: web.Request) -> bool:
    """Whether Accept-Encoding lists `gzip` (as a bare token, as upstream compares it)."""
    return any(token.strip() == "gzip" for token in request.headers.get("Accept-Encoding", "").split(","))


def _response(
    request: web.Request, status: int, body: bytes, content_type: str, headers: dict[str, str]
) -> web.Response:
    response = web.Response(status=status, headers={"Cache-Control": NO_CACHE, **headers})
    if len(body) > GZIP_THRESHOLD_BYTES and accepts_gzip(request):
        body = gzip.compress(body, compresslevel=GZIP_LEVEL)
        response.headers["Content-Encoding"] = "gzip"
        response.headers.add("Vary", "Accept-Encoding")
    response.body = body
    response.content_type = content_type
    return response


def _header_safe(text: str) -> bool:
    """net.NewWarningHeader's rule: valid UTF-8 without control characters (else it is dropped)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not any(unicodedata.category(char) == "Cc" for char in text)


def add_warnings(response: web.StreamResponse, warnings: list[str]) -> None:
    """One `Warning: 299 - "<text>"` header per warning, quotes and backslashes escaped; a warning
    that cannot be a header value, or that was already given, is left out, as upstream's warning
    recorder leaves it out."""
    given = set(response.headers.getall("Warning", []))
    for text in dict.fromkeys(warnings):
        if not _header_safe(text):
            continue
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        header = f'299 - "{escaped}"'
        if header not in given:
            response.headers.add("Warning", header)
            given.add(header)


def object_response(
    request: web.Request,
    body: Any,
    *,
    status: int = 200,
    warnings: list[str] | None = None,
    fmt: OutputFormat | None = None,
) -> web.Response:
    """`body` in the negotiated format. On a resource endpoint, converted first when the client
    asked for a Table or PartialObjectMetadata (a Status is never converted)."""
    kind = request.get(RESOURCE_KIND_KEY)
    fmt = fmt or negotiate(request.headers.get("Accept", ""), transforms=kind is not None)
    if fmt.target is not None and kind is not None and isinstance(body, dict):
        body = table.transform(kind, body, fmt.target, table.table_options(fmt.target, request.query))
    response = _response(request, status, encode(request, body, fmt), fmt.media_type, {})
    add_warnings(response, warnings or [])
    return response


def list_response(request: web.Request, listed: ObjectList, fmt: OutputFormat) -> web.StreamResponse:
    """A list of stored objects as object_response answers it. As JSON it is encoded item by item
    (compact JSON from each item's shared encoding, or from its stored value: ObjectList.compact):
    whole when small (or for HEAD), else streamed as it is encoded."""
    if fmt.target is not None or fmt.is_yaml:
        return object_response(request, listed.body(), fmt=fmt)
    if _pretty(request, fmt):
        items = ((shared.obj, shared.encodings) for shared in listed.shared())
        pieces = codec.json_list_chunks(listed.head, items, pretty=True)
    else:
        pieces = codec.compact_json_list_chunks(listed.head, listed.compact())
    if request.method == "HEAD" or listed.smaller_than(STREAM_LIST_BYTES):
        return _response(request, 200, b"".join(pieces), fmt.media_type, {})
    # Far above the gzip threshold, so compressed whenever the client accepts it.
    return StreamedBody(pieces, fmt.media_type, gzipped=accepts_gzip(request))


class StreamedBody(web.StreamResponse):
    """A 200 whose body is written piece by piece when the response is finished (after every
    middleware has seen it), gzip-compressed as it goes when `gzipped`: the pieces are made as
    they are sent, so the whole body never sits in memory."""

    def __init__(self, pieces: Iterator[bytes], content_type: str, *, gzipped: bool) -> None:
        super().__init__(status=200, headers={"Cache-Control": NO_CACHE})
        self.content_type = content_type
        self._pieces: Iterator[bytes] | None = pieces
        # wbits 31: the gzip format, as gzip.compress writes it.
        self._gzip = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31) if gzipped else None
        if gzipped:
            self.headers["Content-Encoding"] = "gzip"
            self.headers.add("Vary", "Accept-Encoding")

    async def write_eof(self, data: bytes = b"") -> None:
        pieces, self._pieces = self._pieces, None
        listed = 0
        if pieces is not None:
            for piece in pieces:
                listed += len(piece)
                await self.write(self._gzip.compress(piece) if self._gzip else piece)
            if self._gzip is not None:
                await self.write(self._gzip.flush())
        await super().write_eof(data)
        if listed >= RELEASE_AFTER_BYTES:
            await asyncio.to_thread(release_free_memory)


def status_response(request: web.Request, exc: errors.StatusError) -> web.Response:
    try:
        fmt = negotiate(request.headers.get("Accept", ""))
    except errors.StatusError:
        # Nothing acceptable either: upstream writes the Status as indented JSON regardless.
        raw = json.dumps(exc.status, indent=2, ensure_ascii=False).encode()
        response = web.Response(
            status=exc.code, body=raw, content_type=codec.JSON_TYPE, headers={"Cache-Control": NO_CACHE}
        )
    else:
        response = _response(request, exc.code, encode(request, exc.status, fmt), fmt.media_type, {})
    for name, value in exc.headers.items():
        response.headers[name] = value
    return response


def success_status(details: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
