"""Serving the OpenAPI documents as kube-apiserver serves them (k8s.io/kube-openapi's handlers).

- `/openapi/v2`: the Swagger 2.0 document, as JSON or in gnostic's protobuf encoding (what kubectl
  asks for through client-go's discovery), both tagged with the JSON's content hash.
- `/openapi/v3`: the index of the OpenAPI 3.0 documents, each linked with `?hash=<content hash>`;
  `/openapi/v3/<path>` serves them (JSON only), immutable and cacheable for a year when asked by
  hash.

Every answer carries an ETag and Last-Modified and honours If-None-Match / If-Modified-Since.
Documents are built once, the protobuf encoding on first use; they only change with the code.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime

from aiohttp import web
from multidict import CIMultiDict

from apiserver.http import codec
from apiserver.http.responses import NO_CACHE
from apiserver.machinery import errors
from apiserver.machinery.mediatypes import (
    JSON_TYPE,
    OPENAPI_V2_PROTOBUF_TYPE,
    OPENAPI_V2_PROTOBUF_TYPE_DEPRECATED,
)
from apiserver.machinery.types import JSON
from apiserver.openapi import Documents, build_documents
from apiserver.openapi.gnostic import encode_document
from apiserver.resources.base import ResourceKind

IMMUTABLE = "public, immutable"
# What /openapi/v2 offers, in kube-openapi's order (a wildcard picks JSON): (pattern, type served).
_V2_OFFERS = (
    (JSON_TYPE, JSON_TYPE),
    (OPENAPI_V2_PROTOBUF_TYPE_DEPRECATED, OPENAPI_V2_PROTOBUF_TYPE),
    (OPENAPI_V2_PROTOBUF_TYPE, OPENAPI_V2_PROTOBUF_TYPE),
)
_V3_OFFERS = ((JSON_TYPE, JSON_TYPE),)


@dataclass(frozen=True)
class Served:
    """A document as served: its bytes and the content hash upstream uses as ETag and `?hash=`."""

    body: bytes
    hash: str

    @classmethod
    def of(cls, document: JSON) -> Served:
        body = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
        return cls(body, hashlib.sha512(body).hexdigest().upper())

    @property
    def etag(self) -> str:
        return f'"{self.hash}"'


def _etag_matches(header: str, etag: str) -> bool:
    """If-None-Match uses the weak comparison."""
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == etag:
            return True
    return False


def _not_modified(request: web.Request, etag: str, modified: datetime) -> bool:
    if_none_match = request.headers.get("If-None-Match")
    if if_none_match is not None:
        return _etag_matches(if_none_match, etag)
    since = request.headers.get("If-Modified-Since")
    if since:
        try:
            return parsedate_to_datetime(since) >= modified
        except (TypeError, ValueError):
            return False
    return False


def _accept_clauses(header: str) -> list[tuple[str, str]]:
    """The Accept entries as (type, subtype), in the order kube-openapi tries them: by quality, then
    specific types before wildcards, then as listed."""
    clauses: list[tuple[float, bool, bool, int, str, str]] = []
    for index, raw in enumerate(header.split(",")):
        if not raw.strip():
            continue
        media = codec.parse_media_type(raw)
        try:
            quality = float(media.params.get("q", "1"))
        except ValueError:
            quality = 1.0
        kind, _, sub = media.type.partition("/")
        sub = sub or ("*" if kind == "*" else "")
        if quality > 0 and sub:
            clauses.append((-quality, kind == "*", sub == "*", index, kind, sub))
    return [(kind, sub) for *_, kind, sub in sorted(clauses)]


def _negotiate(accept: str, offers: Sequence[tuple[str, str]]) -> str:
    """The media type to answer with: the first offer the best Accept entry matches, else 406."""
    for kind, sub in _accept_clauses(accept or "*/*"):
        for pattern, served in offers:
            offered_kind, _, offered_sub = pattern.partition("/")
            if kind in (offered_kind, "*") and sub in (offered_sub, "*"):
                return served
    raise errors.not_acceptable(sorted({served for _, served in offers}))


def _one_year_from(moment: datetime) -> datetime:
    try:
        return moment.replace(year=moment.year + 1)
    except ValueError:  # 29 February
        return moment + timedelta(days=365)


class OpenAPIService:
    """The handlers of /openapi/v2, /openapi/v3 and /openapi/v3/<path>."""

    def __init__(self, kinds: Sequence[ResourceKind]) -> None:
        documents = build_documents(kinds)
        self.documents: Documents = documents
        self.modified = datetime.now(UTC).replace(microsecond=0)
        self.v2 = Served.of(documents.v2)
        self.v3 = {path: Served.of(document) for path, document in documents.v3.items()}
        self.index = Served.of(
            {"paths": {path: {"serverRelativeURL": self.url_of(path)} for path in sorted(self.v3)}}
        )

    @functools.cached_property
    def v2_protobuf(self) -> Served:
        """The v2 document in gnostic's encoding, made from the JSON served (as kube-openapi makes it)
        and tagged with the JSON's hash: the Vary header tells caches the two apart."""
        return Served(encode_document(self.v2.body), self.v2.hash)

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/openapi/v2", self.serve_v2)
        router.add_get("/openapi/v3", self.serve_v3_index)
        router.add_get("/openapi/v3/{path:.*}", self.serve_v3)

    def url_of(self, path: str) -> str:
        return f"/openapi/v3/{path}?hash={self.v3[path].hash}"

    def _respond(
        self,
        request: web.Request,
        served: Served,
        headers: dict[str, str],
        content_type: str = JSON_TYPE,
        vary: tuple[str, ...] = ("Accept",),
    ) -> web.Response:
        all_headers = CIMultiDict(
            {
                "Cache-Control": NO_CACHE,
                **headers,
                "ETag": served.etag,
                "Last-Modified": format_datetime(self.modified, usegmt=True),
            }
        )
        all_headers.extend(("Vary", value) for value in vary)
        if _not_modified(request, served.etag, self.modified):
            return web.Response(status=304, headers=all_headers)
        response = web.Response(body=served.body, content_type=content_type, headers=all_headers)
        if "gzip" in request.headers.get("Accept-Encoding", "").lower():
            response.enable_compression(web.ContentCoding.gzip)  # as upstream's gzip handler
        return response

    async def serve_v2(self, request: web.Request) -> web.Response:
        media_type = _negotiate(request.headers.get("Accept", ""), _V2_OFFERS)
        served = self.v2 if media_type == JSON_TYPE else self.v2_protobuf
        # kube-apiserver's /openapi/v2 sits behind a gzip handler that varies on the encoding too.
        return self._respond(request, served, {}, media_type, vary=("Accept-Encoding", "Accept"))

    async def serve_v3_index(self, request: web.Request) -> web.Response:
        return self._respond(request, self.index, {})

    async def serve_v3(self, request: web.Request) -> web.Response:
        _negotiate(request.headers.get("Accept", ""), _V3_OFFERS)
        path = request.match_info.get("path", "").strip("/")
        served = self.v3.get(path)
        if served is None:
            raise errors.route_not_found()
        headers: dict[str, str] = {}
        asked = request.query.get("hash")
        if asked:
            if asked != served.hash:
                # A stale link: send the client to the current document.
                return web.Response(
                    status=301, headers={"Location": self.url_of(path), "Cache-Control": NO_CACHE}
                )
            headers["Cache-Control"] = IMMUTABLE
            headers["Expires"] = format_datetime(_one_year_from(datetime.now(UTC)), usegmt=True)
        return self._respond(request, served, headers)
