"""Encoding responses: output negotiation (JSON, YAML), pretty printing, warnings, Status bodies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from apiserver import errors
from apiserver.http import codec

NO_CACHE = "no-cache, private"


@dataclass(frozen=True)
class OutputFormat:
    media_type: str  # application/json or application/yaml

    @property
    def is_yaml(self) -> bool:
        return self.media_type == codec.YAML_TYPE


JSON_OUTPUT = OutputFormat(codec.JSON_TYPE)
YAML_OUTPUT = OutputFormat(codec.YAML_TYPE)
_OFFERED = [codec.JSON_TYPE, codec.YAML_TYPE, codec.PROTOBUF_TYPE]


def negotiate(accept: str) -> OutputFormat:
    """Picks the response format; a client listing protobuf first and JSON after gets JSON, and one
    that accepts nothing we encode gets 406, as kube-apiserver does for types without protobuf."""
    if not accept.strip():
        return JSON_OUTPUT
    for media in codec.parse_accept(accept):
        if media.params.get("as"):
            # Table and PartialObjectMetadata transformations are not served yet: fall through to
            # the next entry, which clients always list (kubectl lists plain JSON last).
            continue
        if media.type in (codec.JSON_TYPE, "application/*", "*/*", "*"):
            return JSON_OUTPUT
        if media.type == codec.YAML_TYPE:
            return YAML_OUTPUT
    raise errors.not_acceptable(_OFFERED)


def encode(request: web.Request, body: Any, fmt: OutputFormat) -> bytes:
    if fmt.is_yaml:
        return codec.encode_yaml(body)
    return codec.encode_json(
        body, pretty=codec.is_pretty(request.query.get("pretty"), request.headers.get("User-Agent", ""))
    )


def add_warnings(response: web.StreamResponse, warnings: list[str]) -> None:
    """One `Warning: 299 - "<text>"` header per warning, quotes and backslashes escaped."""
    for text in warnings:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.add("Warning", f'299 - "{escaped}"')


def object_response(
    request: web.Request,
    body: Any,
    *,
    status: int = 200,
    warnings: list[str] | None = None,
    fmt: OutputFormat | None = None,
) -> web.Response:
    fmt = fmt or negotiate(request.headers.get("Accept", ""))
    response = web.Response(
        status=status,
        body=encode(request, body, fmt),
        content_type=fmt.media_type,
        headers={"Cache-Control": NO_CACHE},
    )
    add_warnings(response, warnings or [])
    return response


def status_response(request: web.Request, exc: errors.StatusError) -> web.Response:
    try:
        fmt = negotiate(request.headers.get("Accept", ""))
    except errors.StatusError:
        fmt = JSON_OUTPUT
    response = web.Response(
        status=exc.code,
        body=encode(request, exc.status, fmt),
        content_type=fmt.media_type,
        headers={"Cache-Control": NO_CACHE},
    )
    for name, value in exc.headers.items():
        response.headers[name] = value
    return response


def success_status(details: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
