"""The `authorizer` of admission expressions (policies, webhooks' matchConditions), answered by the
server's authorizer.

An expression's check runs inside the evaluator (a plain function call), while the server's
authorizer is asynchronous (it may ask the cluster with a SubjectAccessReview). So a policy that
reads `authorizer` (or a webhook whose conditions do) is evaluated in a worker thread, whose
checks are handed to the event loop and waited for; each distinct check is asked once per
evaluation, as upstream's caching authorizer asks it once per request.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from apiserver.auth.attributes import non_resource_attributes, resource_attributes
from apiserver.auth.authz import Authorizer
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo

if TYPE_CHECKING:
    from apiserver.cel.library import authz

T = TypeVar("T")
# How long one check may take (a SubjectAccessReview to the cluster included).
CHECK_TIMEOUT = 10.0


def _user(user: JSON) -> UserInfo:
    extra = {key: tuple(values) for key, values in (user.get("extra") or {}).items()}
    return UserInfo(
        str(user.get("username") or ""), str(user.get("uid") or ""), tuple(user.get("groups") or ()), extra
    )


def _attributes(attributes: JSON) -> RequestInfo:
    verb = str(attributes.get("verb") or "")
    if not attributes.get("resourceRequest"):
        return non_resource_attributes(verb, str(attributes.get("path") or ""))
    return resource_attributes(
        verb,
        api_group=str(attributes.get("group") or ""),
        api_version="*",
        resource=str(attributes.get("resource") or ""),
        subresource=str(attributes.get("subresource") or ""),
        namespace=str(attributes.get("namespace") or ""),
        name=str(attributes.get("name") or ""),
    )


def _checker(authorizer: Authorizer, loop: asyncio.AbstractEventLoop) -> authz.Checker:
    from apiserver.cel.library.authz import ALLOW  # the engine's: loaded with CEL (apiserver/cel)

    asked: dict[str, tuple[str, str, str]] = {}

    def check(user: JSON, attributes: JSON) -> tuple[str, str, str]:
        key = json.dumps([user, attributes], sort_keys=True)
        if key not in asked:
            future = asyncio.run_coroutine_threadsafe(
                authorizer.authorize(_user(user), _attributes(attributes)), loop
            )
            try:
                decision = future.result(timeout=CHECK_TIMEOUT)
            except Exception as exc:  # the authorizer's failure is the check's error, as upstream's
                asked[key] = ("NoOpinion", "", str(exc) or type(exc).__name__)
            else:
                asked[key] = (ALLOW if decision.allowed else "NoOpinion", decision.reason, "")
        return asked[key]

    return check


async def checked(step: Callable[[], T], authorizer: Authorizer | None) -> T:
    """`step()` in a worker thread, its `authorizer` checks answered by `authorizer`."""
    if authorizer is None:
        return step()
    from apiserver.cel.library.authz import checking

    checker = _checker(authorizer, asyncio.get_running_loop())

    def run() -> T:
        with checking(checker):
            return step()

    return await asyncio.to_thread(run)
