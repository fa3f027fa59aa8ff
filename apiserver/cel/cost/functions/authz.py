"""The authorizer library's functions, called as the engine calls them (cel/library/authz.py), so
that an expression checking in a loop is priced, and cancelled, as upstream prices it (350,000 a
check): its checks ask the authorizer the evaluation was given (`authz.checking`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.cel.cost.functions.arithmetic import NO_OVERLOAD
from apiserver.cel.cost.values import CelError
from apiserver.cel.library import authz

_CHECKS = ("kubernetes.authorization.PathCheck", "kubernetes.authorization.ResourceCheck")


def _typed(receiver: str, impl: Callable[..., Any]) -> Callable[..., Any]:
    def call(value: Any, *args: Any) -> Any:
        descriptor = getattr(value, "DESCRIPTOR", None)
        if descriptor is None or descriptor.full_name != receiver or not all(type(a) is str for a in args):
            raise CelError(NO_OVERLOAD)
        return impl(value, *args)

    return call


def _check(value: Any, verb: Any) -> Any:
    descriptor = getattr(value, "DESCRIPTOR", None)
    if descriptor is None or descriptor.full_name not in _CHECKS or type(verb) is not str:
        raise CelError(NO_OVERLOAD)
    return authz.check_either(value, verb)


def _by_arity(arity: int) -> dict[str, Callable[..., Any]]:
    return {
        name: _typed(params[0].name(), impl)
        for name, (_, _, params, impl) in authz.SIGNATURES.items()
        if len(params) == arity
    }


UNARY: dict[str, Callable[[Any], Any]] = _by_arity(1)
BINARY: dict[str, Callable[[Any, Any], Any]] = {**_by_arity(2), "check": _check}
TERNARY: dict[str, Callable[[Any, Any, Any], Any]] = _by_arity(3)
