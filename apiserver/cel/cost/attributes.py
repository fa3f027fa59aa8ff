"""Attributes: how cel-go plans variables, field selections and indexes, and what each costs.

cel-go folds `a.b[c].d` into one attribute: a base (a variable, the value of another expression, or
a conditional `x ? y : z`) and a list of qualifiers. Evaluated as a value, the attribute costs 1
(nothing when its base is a conditional), and each qualifier costs 1 when applied, plus what
computing it costs when it is not a constant (`l[i + 1]`). The base variable itself costs nothing
more. A qualifier applied only if present (`a.?b`, or any after it) costs only when present.
`has(a.b)` costs its qualifiers but not the attribute (Kubernetes' PresenceTestHasCost(false)).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from apiserver.cel.cost.meter import Meter, Step
from apiserver.cel.cost.qualify import ABSENT, qualify
from apiserver.cel.cost.values import NONE, Err, Optional


class Compilable(Protocol):
    """A planned node, compiled into a Step once the whole expression is planned."""

    def compile(self) -> Step: ...


# Applies one qualifier: (object, activation, meter, only if present) -> value, ABSENT or Err.
Qualifier = Callable[[Any, dict[str, Any], Meter, bool], Any]


class Qual:
    """A qualifier as planned: a constant key, or an attribute or expression computing one."""

    __slots__ = ("index", "key", "optional", "test_only")

    def __init__(self, key: Any, *, index: Attribute | None = None, optional: bool = False) -> None:
        self.key = key
        self.index = index
        self.optional = optional
        self.test_only = False

    def compile(self) -> Qualifier:
        if self.index is not None:
            return _computed(self.index.compile_resolve())
        if self.test_only:
            return _presence(self.key)
        return _constant(self.key)


def _constant(key: Any) -> Qualifier:
    def apply(obj: Any, _act: dict[str, Any], m: Meter, if_present: bool) -> Any:
        value = qualify(obj, key, if_present)
        _observe(value, m, if_present)
        return value

    return apply


def _observe(value: Any, m: Meter, if_present: bool) -> None:
    """A qualifier is observed when applied, or, applied only if present, when it found a value."""
    if not if_present or (value is not ABSENT and type(value) is not Err):
        m.cost += 1


def _presence(key: Any) -> Qualifier:
    def apply(obj: Any, _act: dict[str, Any], m: Meter, if_present: bool) -> Any:
        value = qualify(obj, key, True)
        if if_present:
            if value is not ABSENT:
                m.cost += 1
            return value
        m.cost += 1
        return value if type(value) is Err else value is not ABSENT

    return apply


def _computed(resolve: Step) -> Qualifier:
    def apply(obj: Any, act: dict[str, Any], m: Meter, if_present: bool) -> Any:
        key = resolve(act, m)
        value = key if type(key) is Err else qualify(obj, key, if_present)
        _observe(value, m, if_present)
        return value

    return apply


class Attribute:
    """A planned attribute. `base` is a variable's name, a planned expression (whose value is
    qualified), or a (condition, truthy, falsy) triple; `quals` grow as the planner meets
    selections around it, so nothing is compiled before the whole expression is planned."""

    __slots__ = ("base", "own", "quals", "test_only")

    def __init__(
        self, base: str | Compilable | tuple[Compilable, Attribute, Attribute], own: int = 1
    ) -> None:
        self.base = base
        self.quals: list[Qual] = []
        self.own = own
        self.test_only = False

    def add(self, qual: Qual) -> None:
        if isinstance(self.base, tuple):
            self.base[1].add(qual)
            self.base[2].add(qual)
        else:
            self.quals.append(qual)

    def compile_resolve(self) -> Step:
        """The attribute's value without its own observation (as a conditional's branch, or an
        index, resolves it)."""
        base = self._base()
        quals = tuple(qual.compile() for qual in self.quals)
        optional = tuple(qual.optional for qual in self.quals)
        if not quals:
            return base
        if not any(optional) and all(q.index is None and not q.test_only for q in self.quals):
            return _select_path(base, tuple(q.key for q in self.quals))
        return _qualified(base, quals, optional)

    def compile(self) -> Step:
        """The attribute evaluated as a value: resolved, then observed."""
        if isinstance(self.base, str) and not self.quals:
            return _bare_variable(self.base, self.own)
        resolve = self.compile_resolve()
        own, test_only = self.own, self.test_only
        if isinstance(self.base, str) and self._plain_fields():
            return _field_path(self.base, tuple(q.key for q in self.quals), own, resolve)

        def evaluate(act: dict[str, Any], m: Meter) -> Any:
            value = resolve(act, m)
            m.cost += own
            if test_only and type(value) is Optional:
                return value.present
            return value

        return evaluate

    def _plain_fields(self) -> bool:
        return all(
            type(q.key) is str and q.index is None and not q.optional and not q.test_only for q in self.quals
        )

    def _base(self) -> Step:
        if isinstance(self.base, str):
            return _variable(self.base)
        if isinstance(self.base, tuple):
            condition, truthy, falsy = self.base
            return _conditional(condition.compile(), truthy.compile_resolve(), falsy.compile_resolve())
        return self.base.compile()


def _variable(name: str) -> Step:
    error = Err(f"no such attribute(s): {name}")

    def variable(act: dict[str, Any], _m: Meter) -> Any:
        return act.get(name, error)

    return variable


def _bare_variable(name: str, own: int) -> Step:
    error = Err(f"no such attribute(s): {name}")

    def variable(act: dict[str, Any], m: Meter) -> Any:
        m.cost += own
        return act.get(name, error)

    return variable


def _field_path(name: str, keys: tuple[str, ...], own: int, resolve: Step) -> Step:
    """`variable.a.b` through maps that have the fields, in one go: the cost is the attribute's and
    one per field. Anything else (a missing field, a list on the way) takes the general path."""
    cost = own + len(keys)
    evaluate = _evaluated(resolve, own)

    def fields(act: dict[str, Any], m: Meter) -> Any:
        obj = act.get(name, _NOWHERE)
        for key in keys:
            if type(obj) is not dict:
                return evaluate(act, m)
            obj = obj.get(key, _NOWHERE)
        if obj is _NOWHERE:
            return evaluate(act, m)
        m.cost += cost
        return obj

    return fields


def _evaluated(resolve: Step, own: int) -> Step:
    def evaluate(act: dict[str, Any], m: Meter) -> Any:
        value = resolve(act, m)
        m.cost += own
        return value

    return evaluate


_NOWHERE = object()


def _conditional(condition: Step, truthy: Step, falsy: Step) -> Step:
    def conditional(act: dict[str, Any], m: Meter) -> Any:
        chosen = condition(act, m)
        if chosen is True:
            return truthy(act, m)
        if chosen is False:
            return falsy(act, m)
        return chosen if type(chosen) is Err else Err("no such overload")

    return conditional


def _select_path(base: Step, keys: tuple[Any, ...]) -> Step:
    """The common case: constant keys, none optional; each step costs 1, up to a failing one."""
    count = len(keys)

    def select(act: dict[str, Any], m: Meter) -> Any:
        obj = base(act, m)
        if type(obj) is Err:
            return obj
        if type(obj) is Optional:
            return _optional_path(obj, keys, m)
        for done, key in enumerate(keys):
            if type(obj) is dict and type(key) is str and key in obj:
                obj = obj[key]
                continue
            obj = qualify(obj, key, False)
            if type(obj) is Err:
                m.cost += done + 1
                return obj
        m.cost += count
        return obj

    return select


def _optional_path(obj: Optional, keys: tuple[Any, ...], m: Meter) -> Any:
    if not obj.present:
        return obj
    value = obj.value
    for key in keys:
        value = qualify(value, key, True)
        if value is ABSENT:
            return NONE
        if type(value) is Err:
            return value
        m.cost += 1
    return Optional(value)


def _qualified(base: Step, quals: tuple[Qualifier, ...], optional: tuple[bool, ...]) -> Step:
    def qualified(act: dict[str, Any], m: Meter) -> Any:
        obj = base(act, m)
        if type(obj) is Err:
            return obj
        is_optional = False
        if type(obj) is Optional:
            if not obj.present:
                return obj
            obj, is_optional = obj.value, True
        for apply, optional_qual in zip(quals, optional, strict=True):
            is_optional = is_optional or optional_qual
            obj = apply(obj, act, m, is_optional)
            if obj is ABSENT:
                return NONE
            if type(obj) is Err:
                return obj
        return Optional(obj) if is_optional else obj

    return qualified
