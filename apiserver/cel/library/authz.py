"""Kubernetes' authorizer library: `authorizer.group(g).resource(r)...check(verb)`,
`authorizer.path(p).check(verb)`, `authorizer.serviceAccount(ns, name)`,
`authorizer.requestResource`, and the Decision's allowed(), reason(), errored() and error().

The checks build attributes as upstream's (a resource check is for every API version: "*") and
hand them to the checker the caller set for the evaluation (`checking`): the server's authorizer,
which may have to ask the cluster. Each value carries its state as JSON in an opaque message.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from cel_expr_python import cel

from apiserver.cel.library.types import (
    AUTHORIZER_TYPE,
    DECISION_TYPE,
    GROUP_CHECK_TYPE,
    PATH_CHECK_TYPE,
    RESOURCE_CHECK_TYPE,
    Authorizer,
    Decision,
    GroupCheck,
    PathCheck,
    ResourceCheck,
)
from apiserver.machinery.types import JSON

T = cel.Type
ALLOW = "Allow"
# (user, attributes) -> (decision: Allow, Deny or NoOpinion, reason, error or "").
Checker = Callable[[JSON, JSON], tuple[str, str, str]]
_CHECKER: ContextVar[Checker | None] = ContextVar("cel_authorizer", default=None)


@contextlib.contextmanager
def checking(checker: Checker) -> Iterator[None]:
    """Evaluations in this block (in this context) check with `checker`."""
    token = _CHECKER.set(checker)
    try:
        yield
    finally:
        _CHECKER.reset(token)


def authorizer_for(user: JSON) -> Any:
    """The `authorizer` variable for `user` (authentication/v1 UserInfo JSON)."""
    return Authorizer(value=json.dumps({"user": user}))


def request_resource(
    user: JSON, group: str, resource: str, subresource: str, namespace: str, name: str
) -> Any:
    """The `authorizer.requestResource` variable: the request's own resource, for `user`."""
    state = {"user": user, "group": group, "resource": resource, "subresource": subresource}
    return ResourceCheck(value=json.dumps({**state, "namespace": namespace, "name": name}))


def _state(value: Any) -> JSON:
    state: JSON = json.loads(value.value)
    return state


def _with(message: Any, value: Any, **changes: str) -> Any:
    return message(value=json.dumps({**_state(value), **changes}))


def _service_account(authorizer: Any, namespace: str, name: str) -> Any:
    """upstream's serviceaccount.UserInfo: the account's user name and its two groups."""
    user = {
        "username": f"system:serviceaccount:{namespace}:{name}",
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
    }
    return Authorizer(value=json.dumps({"user": user}))


def _check(value: Any, verb: str, attributes: JSON) -> Any:
    checker = _CHECKER.get()
    state = _state(value)
    if checker is None:
        decision, reason, error = "NoOpinion", "", "no authorizer is available to this evaluation"
    else:
        decision, reason, error = checker(state["user"], {**attributes, "verb": verb})
    return Decision(value=json.dumps({"decision": decision, "reason": reason, "error": error}))


def check_either(value: Any, verb: str) -> Any:
    """check() of a PathCheck or a ResourceCheck: cel-expr-python takes one implementation for
    overloads whose arguments are of the same kinds (two messages), so it tells them apart."""
    state = _state(value)
    if value.DESCRIPTOR.name == "PathCheck":
        return _check(value, verb, {"path": state["path"]})
    keys = ("group", "resource", "subresource", "namespace", "name", "fieldSelector", "labelSelector")
    return _check(value, verb, {"resourceRequest": True, **{key: state.get(key, "") for key in keys}})


def _setter(field: str) -> Callable[[Any, str], Any]:
    def set_field(value: Any, text: str) -> Any:
        return _with(ResourceCheck, value, **{field: text})

    return set_field


def _decision(read: Callable[[JSON], Any]) -> Callable[[Any], Any]:
    return lambda decision: read(_state(decision))


# Every function: (overload id, result type, argument types: the receiver first, implementation).
_Signature = tuple[str, Any, list[Any], Callable[..., Any]]
SIGNATURES: dict[str, _Signature] = {
    "path": (
        "authorizer_path",
        PATH_CHECK_TYPE,
        [AUTHORIZER_TYPE, T.STRING],
        lambda a, path: _with(PathCheck, a, path=path),
    ),
    "group": (
        "authorizer_group",
        GROUP_CHECK_TYPE,
        [AUTHORIZER_TYPE, T.STRING],
        lambda a, group: _with(GroupCheck, a, group=group),
    ),
    "serviceAccount": (
        "authorizer_serviceaccount",
        AUTHORIZER_TYPE,
        [AUTHORIZER_TYPE, T.STRING, T.STRING],
        _service_account,
    ),
    "resource": (
        "groupcheck_resource",
        RESOURCE_CHECK_TYPE,
        [GROUP_CHECK_TYPE, T.STRING],
        lambda g, resource: _with(ResourceCheck, g, resource=resource),
    ),
    **{
        field: (
            f"resourcecheck_{field.lower()}",
            RESOURCE_CHECK_TYPE,
            [RESOURCE_CHECK_TYPE, T.STRING],
            _setter(field),
        )
        for field in ("subresource", "namespace", "name", "fieldSelector", "labelSelector")
    },
    "allowed": ("decision_allowed", T.BOOL, [DECISION_TYPE], _decision(lambda d: d["decision"] == ALLOW)),
    "reason": ("decision_reason", T.STRING, [DECISION_TYPE], _decision(lambda d: d["reason"])),
    "errored": ("decision_errored", T.BOOL, [DECISION_TYPE], _decision(lambda d: bool(d["error"]))),
    "error": ("decision_error", T.STRING, [DECISION_TYPE], _decision(lambda d: d["error"])),
}


def _member(name: str, signature: _Signature) -> Any:
    overload, returns, params, impl = signature
    return cel.FunctionDecl(name, [cel.Overload(overload, returns, params, is_member=True, impl=impl)])


FUNCTIONS = (
    *(_member(name, signature) for name, signature in SIGNATURES.items()),
    cel.FunctionDecl(
        "check",
        [
            cel.Overload(
                "pathcheck_check",
                DECISION_TYPE,
                [PATH_CHECK_TYPE, T.STRING],
                is_member=True,
            ),
            cel.Overload(
                "resourcecheck_check",
                DECISION_TYPE,
                [RESOURCE_CHECK_TYPE, T.STRING],
                is_member=True,
                impl=check_either,
            ),
        ],
    ),
)
