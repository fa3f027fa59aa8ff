"""List and map literals (10 and 30 each, nothing when every element is a constant: cel-go builds
those once) and comprehensions (free themselves; their range, condition, step and result cost what
they cost, per iteration)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apiserver.cel.checked import Comprehension, CreateList, CreateStruct
from apiserver.cel.cost.macros import fold_quantifier, quantifier
from apiserver.cel.cost.meter import Meter, Step
from apiserver.cel.cost.tracker import LIST_CREATE, MAP_CREATE
from apiserver.cel.cost.values import AccumulatedList, Err, Optional, Unsupported, type_name

if TYPE_CHECKING:
    from apiserver.cel.cost.plan import Planned, Planner

_NO_VALUE = object()
# Go's %T of cel-go's values, which its iteration error names.
_GO_TYPES = {
    "bool": "types.Bool",
    "int": "types.Int",
    "uint": "types.Uint",
    "double": "types.Double",
    "string": "types.String",
    "bytes": "types.Bytes",
    "null_type": "types.Null",
    "google.protobuf.Timestamp": "types.Timestamp",
    "google.protobuf.Duration": "types.Duration",
    "optional_type": "*types.Optional",
    "type": "*types.Type",
}


def plan_list(planner: Planner, node: CreateList) -> Planned:
    from apiserver.cel.cost.plan import Planned

    elements = [planner.plan(element) for element in node.elements]
    optional = frozenset(node.optional_indices)
    if all(element.is_constant for element in elements) and not optional:
        return Planned(constant=[element.constant for element in elements])
    return Planned(build=lambda: _list([element.compile() for element in elements], optional))


def _list(steps: list[Step], optional: frozenset[int]) -> Step:
    def make(act: dict[str, Any], m: Meter) -> Any:
        built = []
        for index, step in enumerate(steps):
            value = step(act, m)
            if type(value) is Err:
                m.cost += LIST_CREATE
                return value
            if index in optional:
                value = _optional_element(value)
                if value is _NO_VALUE or type(value) is Err:
                    if type(value) is Err:
                        m.cost += LIST_CREATE
                        return value
                    continue
            built.append(value)
        m.cost += LIST_CREATE
        return built

    return make


def _optional_element(value: Any) -> Any:
    if type(value) is not Optional:
        return Err(f"cannot initialize optional list element from non-optional value {value}")
    return value.value if value.present else _NO_VALUE


def plan_map(planner: Planner, node: CreateStruct) -> Planned:
    from apiserver.cel.cost.plan import Planned

    if node.message_name:
        raise Unsupported(f"creating a message {node.message_name}")
    entries = []
    for entry in node.entries:
        if isinstance(entry.key, str):
            raise Unsupported("a message field in a map literal")
        entries.append((planner.plan(entry.key), planner.plan(entry.value), entry.optional))
    if all(key.is_constant and value.is_constant for key, value, _ in entries):
        return Planned(constant={key.constant: value.constant for key, value, _ in entries})
    return Planned(build=lambda: _map([(k.compile(), v.compile(), o) for k, v, o in entries]))


def _map(entries: list[tuple[Step, Step, bool]]) -> Step:
    def make(act: dict[str, Any], m: Meter) -> Any:
        built: dict[Any, Any] = {}
        for key_step, value_step, optional in entries:
            key = key_step(act, m)
            value = key if type(key) is Err else value_step(act, m)
            if type(value) is not Err and optional:
                value = _optional_entry(key, value)
            if type(value) is Err:
                m.cost += MAP_CREATE
                return value
            if value is _NO_VALUE:
                built.pop(key, None)
                continue
            built[key] = value
        m.cost += MAP_CREATE
        return built

    return make


def _optional_entry(key: Any, value: Any) -> Any:
    if type(value) is not Optional:
        return Err(f"cannot initialize optional entry '{key}' from non-optional value {value}")
    return value.value if value.present else _NO_VALUE


def plan_comprehension(planner: Planner, node: Comprehension) -> Planned:
    from apiserver.cel.cost.plan import Planned

    predicate = None if node.iter_var2 else quantifier(node)
    if predicate is not None:
        return _plan_quantifier(planner, node, planner.plan(predicate))
    parts = [
        planner.plan(part) for part in (node.iter_range, node.accu_init, node.loop_condition, node.loop_step)
    ]
    result = planner.plan(node.result)

    def build() -> Step:
        steps = [part.compile() for part in parts]
        names = (node.iter_var, node.iter_var2) if node.iter_var2 else (node.iter_var,)
        return _fold(names, node.accu_var, steps, result.compile())

    return Planned(build=build)


def _plan_quantifier(planner: Planner, node: Comprehension, predicate: Planned) -> Planned:
    from apiserver.cel.cost.plan import Planned

    iter_range = planner.plan(node.iter_range)
    universal = node.accu_init.value is True  # type: ignore[union-attr]

    def build() -> Step:
        return fold_quantifier(universal, node.iter_var, iter_range.compile(), predicate.compile(), _items)

    return Planned(build=build)


def _items(collection: Any) -> Any:
    if type(collection) is dict:
        return list(collection)
    if isinstance(collection, list):
        return collection
    if type(collection) is Err:
        return collection
    return Err(f"got '{_GO_TYPES.get(type_name(collection), 'types.Object')}', expected iterable type")


def _pairs(collection: Any) -> Any:
    """What a two-variable comprehension iterates: a list's indexes and elements, a map's keys and
    values."""
    if type(collection) is dict:
        return list(collection.items())
    if isinstance(collection, list):
        return list(enumerate(collection))
    return _items(collection)


def _fold(names: tuple[str, ...], accu_var: str, steps: list[Step], result: Step) -> Step:
    """A comprehension over one variable (the elements) or two (index or key, and value)."""
    iter_range, accu_init, condition, loop_step = steps
    first, second = names[0], (names[1] if len(names) > 1 else None)
    iterate = _items if second is None else _pairs

    def fold(act: dict[str, Any], m: Meter) -> Any:
        items = iterate(iter_range(act, m))
        if type(items) is Err:
            return items
        local = dict(act)
        accu = accu_init(act, m)
        local[accu_var] = AccumulatedList() if type(accu) is list and not accu else accu
        for item in items:
            if second is None:
                local[first] = item
            else:
                local[first], local[second] = item
            if condition(local, m) is False:
                break
            local[accu_var] = loop_step(local, m)
            m.check()
        for name in names:
            if name in act:
                local[name] = act[name]
            else:
                local.pop(name, None)
        value = result(local, m)
        return list(value) if type(value) is AccumulatedList else value

    return fold
