"""The self reviews' endpoints on a standalone server (`apiserver.rbac.selfreviews`):
POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews and selfsubjectrulesreviews, and
/apis/authentication.k8s.io/v1/selfsubjectreviews, answered 201 as kube-apiserver answers them.

Bodies are JSON, YAML, or protobuf (what kubectl sends); answers are JSON or YAML (kubectl accepts
JSON).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from apiserver.auth.attributes import request_user
from apiserver.auth.authz import Authorizer
from apiserver.http import codec
from apiserver.http.responses import object_response
from apiserver.machinery import errors, protobuf
from apiserver.machinery.types import JSON
from apiserver.rbac import selfreviews
from apiserver.rbac.selfreviews import ACCESS_REVIEW, REVIEWS, RULES_REVIEW, RulesFor

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def parse_review(content_type: str, body: bytes, kind: str) -> JSON:
    """The review object a request sent, whatever its encoding."""
    media = codec.parse_media_type(content_type).type if content_type else codec.JSON_TYPE
    if media != protobuf.MEDIA_TYPE:
        _, parsed = codec.parse_body(content_type, body, (*codec.BODY_TYPES, protobuf.MEDIA_TYPE))
        value: Any = parsed.value
        if not isinstance(value, dict):
            raise errors.bad_request(f"the body is not a {kind} object")
        return value
    try:
        api_version, sent_kind, raw = protobuf.unwrap(body)
        obj = protobuf.decode(raw, selfreviews.PROTOBUF_SCHEMAS[kind])
    except protobuf.ProtobufError as exc:
        raise errors.bad_request(str(exc)) from None
    return {"kind": sent_kind, "apiVersion": api_version, **obj}


class SelfReviewEndpoints:
    """The three endpoints, over the server's authorizer chain and its rules."""

    def __init__(self, authorizer: Authorizer, rules_for: RulesFor) -> None:
        self.authorizer = authorizer
        self.rules_for = rules_for

    def add_routes(self, app: web.Application) -> None:
        """Before the API's catch-all routes, which would answer 404."""
        for group, plural, kind in REVIEWS:
            app.router.add_route("*", f"/apis/{group}/v1/{plural}", self._handler(kind))

    def _handler(self, kind: str) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            if request.method != "POST":
                raise errors.method_not_allowed()
            raw, content_type = await request.read(), request.headers.get("Content-Type", "")
            body = await codec.off_loop(len(raw), lambda: parse_review(content_type, raw, kind))
            user = request_user(request)
            if user is None:
                raise errors.unauthorized()
            if kind == ACCESS_REVIEW:
                answer = await selfreviews.access_review(self.authorizer, user, body)
            elif kind == RULES_REVIEW:
                answer = selfreviews.rules_review(self.rules_for, user, body)
            else:
                answer = selfreviews.self_review(user, body)
            return object_response(request, answer, status=201)

        return handle
