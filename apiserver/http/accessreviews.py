"""The access reviews' endpoints (`apiserver.rbac.accessreviews`), what `kubectl coreio` calls:
POST /apis/rbac.authorization.core.io/v1/namespaces/<ns>/{resourceaccessreviews,
accessexplanations,rolebindingreviews}, and rolebindingreviews without a namespace for all of them.
Answered 201, as upstream answers its reviews.

Creating one is authorized as any request (everyone may: the ClusterRole coreio:access-reviewer).
The answer reveals RoleBindings, so each endpoint also asks the server's authorizer chain whether the
caller may list RoleBindings where it looks; a RoleBindingReview of all namespaces keeps to those the
caller may list. An explanation of someone else's access needs what upstream's
LocalSubjectAccessReview needs: `create localsubjectaccessreviews` in the namespace.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from apiserver.auth.attributes import attributes_from_request, request_user, resource_attributes
from apiserver.auth.authz import forbidden
from apiserver.auth.impersonation import acting_as
from apiserver.auth.requestinfo import RequestInfo
from apiserver.http import codec
from apiserver.http.responses import object_response
from apiserver.machinery import errors
from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo
from apiserver.rbac import accessreviews as reviews
from apiserver.rbac.authorizer import Binding
from apiserver.rbac.chain import Authorization
from apiserver.rbac.explain import explain
from apiserver.rbac.whocan import who_can
from apiserver.resources.rolebinding import ACCESS_REVIEWS, GROUP

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Answer = Callable[[UserInfo, str, JSON], Awaitable[JSON]]


def list_role_bindings(namespace: str) -> RequestInfo:
    return resource_attributes(
        "list", api_group=GROUP, api_version="v1", resource="rolebindings", namespace=namespace
    )


def ask_about_others(namespace: str) -> RequestInfo:
    """What upstream asks of whoever asks about another user's access in a namespace."""
    return resource_attributes(
        "create",
        api_group="authorization.k8s.io",
        api_version="v1",
        resource="localsubjectaccessreviews",
        namespace=namespace,
    )


class AccessReviewEndpoints:
    def __init__(self, authz: Authorization, *, standalone: bool) -> None:
        self.authz = authz
        # In a cluster the cluster's own bindings may allow more than coreio can list.
        self.standalone = standalone

    def add_routes(self, app: web.Application) -> None:
        """Before the API's catch-all routes, which would answer 404."""
        answers: dict[str, Answer] = {
            reviews.RESOURCE_ACCESS_REVIEW: self._who_can,
            reviews.ACCESS_EXPLANATION: self._explain,
            reviews.ROLE_BINDING_REVIEW: self._bindings,
        }
        prefix = f"/apis/{GROUP}/v1"
        for plural, kind in ACCESS_REVIEWS:
            route = _handler(kind, plural, answers[kind])
            app.router.add_route("*", f"{prefix}/namespaces/{{namespace}}/{plural}", route)
            if kind == reviews.ROLE_BINDING_REVIEW:  # also of every namespace the caller may list
                app.router.add_route("*", f"{prefix}/{plural}", route)

    async def _require(self, user: UserInfo, info: RequestInfo) -> None:
        decision = await self.authz.authorizer.authorize(user, info)
        if not decision.allowed:
            raise forbidden(user, info, decision.reason)

    async def _who_can(self, caller: UserInfo, namespace: str, body: JSON) -> JSON:
        spec, info = reviews.attributes(reviews.RESOURCE_ACCESS_REVIEW, body, namespace)
        await self._require(caller, list_role_bindings(namespace))
        found = who_can(self.authz.rbac, info, bootstrap=self.authz.bootstrap_rules)
        status = reviews.who_can_status(found, incomplete=not self.standalone)
        return reviews.answer(reviews.RESOURCE_ACCESS_REVIEW, namespace, spec, status)

    async def _explain(self, caller: UserInfo, namespace: str, body: JSON) -> JSON:
        name, groups, uid = reviews.subject_of(body)
        spec, info = reviews.attributes(reviews.ACCESS_EXPLANATION, body, namespace)
        await self._require(caller, list_role_bindings(namespace))
        user = acting_as(name, groups, uid)
        if user.name != caller.name or not set(user.groups) <= set(caller.groups):
            await self._require(caller, ask_about_others(namespace))
        authz = self.authz
        found = await explain(authz.rbac, user, info, defaults=authz.bootstrap_rules, delegate=authz.delegate)
        written: JSON = {
            "user": name,
            **({"groups": groups} if groups else {}),
            **({"uid": uid} if uid else {}),
        }
        written.update(spec)
        return reviews.answer(
            reviews.ACCESS_EXPLANATION, namespace, written, reviews.explanation_status(found)
        )

    async def _bindings(self, caller: UserInfo, namespace: str, body: JSON) -> JSON:
        problems_only = reviews.member(body, "spec").get("problemsOnly") is True
        if namespace:
            await self._require(caller, list_role_bindings(namespace))
            found = list(self.authz.index.role_bindings(namespace))
        else:
            found = await self._visible_bindings(caller)
        status = reviews.binding_review_status(self.authz.rbac, found, problems_only=problems_only)
        spec: JSON = {"problemsOnly": True} if problems_only else {}
        return reviews.answer(reviews.ROLE_BINDING_REVIEW, namespace, spec, status)

    async def _visible_bindings(self, caller: UserInfo) -> list[Binding]:
        """Every binding, if the caller may list them all; else those of the namespaces it may."""
        everything = self.authz.index.all_bindings()
        if (await self.authz.authorizer.authorize(caller, list_role_bindings(""))).allowed:
            return everything
        visible: dict[str, bool] = {}
        for namespace in sorted({b.namespace for b in everything}):
            visible[namespace] = (
                await self.authz.authorizer.authorize(caller, list_role_bindings(namespace))
            ).allowed
        return [b for b in everything if visible[b.namespace]]


def _handler(kind: str, plural: str, answer: Answer) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        # The namespace authorization was asked about, not a second reading of the path.
        info = attributes_from_request(request)
        if info.resource != plural or info.name or info.subresource:
            raise errors.route_not_found()
        if request.method != "POST":
            raise errors.method_not_allowed()
        caller = request_user(request)
        if caller is None:
            raise errors.unauthorized()
        namespace = info.namespace
        raw, content_type = await request.read(), request.headers.get("Content-Type", "")
        body = await codec.off_loop(len(raw), lambda: _parse(content_type, raw, kind))
        reviews.check_namespace(body, namespace)
        return object_response(request, await answer(caller, namespace, body), status=201)

    return handle


def _parse(content_type: str, body: bytes, kind: str) -> JSON:
    """The review a request sent (JSON or YAML): an object of `kind`, or one without a kind."""
    _, parsed = codec.parse_body(content_type, body)
    value = parsed.value
    if not isinstance(value, dict):
        raise errors.bad_request(f"the body is not a {kind} object")
    sent = value.get("kind")
    if sent not in (None, "", kind) or value.get("apiVersion") not in (None, "", reviews.API_VERSION):
        raise errors.bad_request(
            f"the body is a {sent} of {value.get('apiVersion')}, not a {kind} of {reviews.API_VERSION}"
        )
    return value
