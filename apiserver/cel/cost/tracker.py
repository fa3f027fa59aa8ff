"""The runtime cost of one call, as cel-go v0.23.2's CostTracker counts it with Kubernetes'
CostEstimator (k8s.io/apiserver/pkg/cel/library/cost.go, strict cost) in front of it.

Kubernetes' estimator answers first, by function name (a few by overload); what it leaves is cel-go's
own rule, by overload id: O(n) for a handful of string and list functions, 1 for everything else.
A call whose overload the checker could not pin down (dynamically typed operands) has an empty
overload id upstream, and so costs 1 whatever its operands: `object.a + object.b` costs 1 where
`object.a + 'x'` costs the length of both strings.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from apiserver.cel.cost.values import AccumulatedList, Optional, UInt
from apiserver.cel.library import formats

SELECT_AND_IDENT = 1
LIST_CREATE = 10
MAP_CREATE = 30
STRUCT_CREATE = 40
STRING_TRAVERSAL = 0.1
REGEX_LENGTH = 0.25
AUTHZ_CHECK = 350_000
_SELECTOR_BASE = 10
_REQUIREMENTS_PER_CHARACTER = 0.5
_REQUIREMENT_COST = 10.0 + 40.0


def size(value: Any) -> int:
    """cel-go's actualSize: the length of what has one (code points of a string), the size of an
    optional's value, 1 for the rest."""
    kind = type(value)
    if kind is str or kind is bytes or kind is list or kind is dict or isinstance(value, list):
        return len(value)
    if kind is Optional and value.present:
        return size(value.value)
    return 1


def _library_size(value: Any) -> int:
    """Kubernetes' own actualSize, which does not look into optionals."""
    return size(value) if type(value) is not Optional else 1


def traversal(value: Any) -> int:
    """Kubernetes' traversalCost: a tenth of every string's bytes, 1 for every other scalar."""
    if isinstance(value, str):
        return int(len(value.encode()) * STRING_TRAVERSAL)
    if isinstance(value, bytes):
        return int(len(value) * STRING_TRAVERSAL)
    if isinstance(value, list):
        return sum(traversal(item) for item in value)
    if isinstance(value, dict):
        return sum(traversal(key) + traversal(item) for key, item in value.items())
    return 1


def _ceil_tenths(length: int, factor: float = STRING_TRAVERSAL) -> int:
    return math.ceil(length * factor)


def _regex(text: Any, pattern: Any) -> int:
    text_cost = math.ceil((1.0 + _library_size(text)) * STRING_TRAVERSAL)
    return text_cost * math.ceil(_library_size(pattern) * REGEX_LENGTH)


def _first_traversed(args: Sequence[Any], _result: Any) -> int:
    return _ceil_tenths(_library_size(args[0]))


def _first_twice(args: Sequence[Any], _result: Any) -> int:
    return math.ceil(_library_size(args[0]) * 2 * STRING_TRAVERSAL)


def _contains_ip(overload: str, args: Sequence[Any]) -> int:
    cidr = _library_size(args[0])
    cost = _ceil_tenths(cidr + cidr)
    if overload == "cidr_contains_ip_string":
        cost += _ceil_tenths(_library_size(args[1]))
    return cost


def _contains_cidr(overload: str, args: Sequence[Any]) -> int:
    cidr = _library_size(args[0])
    cost = _ceil_tenths(cidr + cidr) + _ceil_tenths(cidr) + 1
    if overload == "cidr_contains_cidr_string":
        cost += _ceil_tenths(_library_size(args[1]))
    return cost


_Rule = Callable[[Sequence[Any], Any], int]

# The sets extension's own trackers (cel-go ext/sets.go), which cel-go asks before Kubernetes'
# estimator: 1, and each pair of elements compared once (twice for equivalent).
_SETS = {"sets.contains": 1.0, "sets.intersects": 1.0, "sets.equivalent": 2.0}


def _sets(function: str, args: Sequence[Any]) -> int | None:
    factor = _SETS.get(function)
    if factor is None or len(args) != 2:
        return None
    return 1 + int(float(size(args[0]) * size(args[1])) * factor)


def _validate(args: Sequence[Any], _result: Any) -> int | None:
    """A format's validate: the text's walk times the format's regex, as for matches."""
    known = formats.format_of(args[0]) if len(args) == 2 else None
    if known is None:
        return None
    text_cost = math.ceil((1.0 + _library_size(args[1])) * STRING_TRAVERSAL)
    return text_cost * math.ceil(known.max_regex_size * REGEX_LENGTH)


def _nominal(_args: Sequence[Any], _result: Any) -> int:
    return 1


# Kubernetes' builders and accessors (authorization, IP, CIDR, Quantity, Semver, URL): 1 each.
_NOMINAL = """
    serviceAccount path group resource subresource namespace name allowed reason error errored
    masked prefixLength family isUnspecified isLoopback isLinkLocalMulticast isLinkLocalUnicast
    isGlobalUnicast format.named sign asInteger isInteger asApproximateFloat isGreaterThan isLessThan
    compareTo add sub major minor patch getScheme getHostname getHost getPort getEscapedPath getQuery
"""

_LIBRARY: dict[str, _Rule] = {
    "check": lambda _args, _result: AUTHZ_CHECK,
    **dict.fromkeys(
        ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"), lambda a, _r: traversal(a[0])
    ),
    **dict.fromkeys(
        ("url", "lowerAscii", "upperAscii", "substring", "trim", "jsonpatch.escapeKey"), _first_traversed
    ),
    **dict.fromkeys(("replace", "split", "ip.isCanonical"), _first_twice),
    "join": lambda _args, result: math.ceil(_library_size(result) * 2 * STRING_TRAVERSAL),
    **dict.fromkeys(("find", "findAll"), lambda a, _r: _regex(a[0], a[1])),
    **dict.fromkeys(
        ("cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver"), _first_traversed
    ),
    **dict.fromkeys(_NOMINAL.split(), _nominal),
}

# The library's value types, for which Kubernetes' estimator prices `==` at 1.
LIBRARY_TYPES = frozenset(
    [
        "kubernetes.Quantity",
        "kubernetes.URL",
        "kubernetes.Semver",
        "net.IP",
        "net.CIDR",
        "kubernetes.authorization.Authorizer",
        "kubernetes.authorization.PathCheck",
        "kubernetes.authorization.GroupCheck",
        "kubernetes.authorization.ResourceCheck",
        "kubernetes.authorization.Decision",
        "kubernetes.NamedFormat",
    ]
)


def _selector(args: Sequence[Any]) -> int:
    """Parsing a field or label selector: its walk, and about one requirement every two
    characters."""
    length = _library_size(args[1])
    requirements = _ceil_tenths(length, _REQUIREMENTS_PER_CHARACTER)
    return _SELECTOR_BASE + _ceil_tenths(length) + _ceil_tenths(requirements, _REQUIREMENT_COST)


def _library_cost(function: str, overload: str, args: Sequence[Any], result: Any) -> int | None:
    """Kubernetes' CallCost, or None where it leaves the call to cel-go's rules."""
    if function in ("fieldSelector", "labelSelector") and len(args) >= 2:
        return _selector(args)
    if function == "validate":
        return _validate(args, result)
    if function == "ip" and args:
        return 1 if overload == "cidr_ip" else _ceil_tenths(_library_size(args[0]))
    if function == "containsIP" and len(args) >= 2:
        return _contains_ip(overload, args)
    if function == "containsCIDR" and len(args) >= 2:
        return _contains_cidr(overload, args)
    if function == "_==_" and len(args) == 2 and _is_library_value(args[0]):
        return 1
    rule = _LIBRARY.get(function)
    if rule is None or (not args and rule is not _nominal and function != "check"):
        return None
    return rule(args, result)


def _is_library_value(value: Any) -> bool:
    descriptor = getattr(value, "DESCRIPTOR", None)
    return descriptor is not None and descriptor.full_name in LIBRARY_TYPES


_LINEAR = frozenset(
    (
        "starts_with_string",
        "ends_with_string",
        "string_to_bytes",
        "bytes_to_string",
        "strings_quote",
        "string_format",
    )
)
_SMALLER = frozenset(
    [
        "less_string",
        "greater_string",
        "less_equals_string",
        "greater_equals_string",
        "less_bytes",
        "greater_bytes",
        "less_equals_bytes",
        "greater_equals_bytes",
        "equals",
        "not_equals",
    ]
)


def _standard_cost(overload: str, args: Sequence[Any]) -> int:
    """cel-go's own rule for a call Kubernetes' estimator left alone."""
    if overload in _SMALLER:
        return _ceil_tenths(min(size(args[0]), size(args[1])))
    if overload in _LINEAR:
        return _ceil_tenths(size(args[0]))
    if overload == "in_list":
        return size(args[1])
    if overload in ("add_string", "add_bytes"):
        return _ceil_tenths(size(args[0]) + size(args[1]))
    if overload == "matches_string":
        text_cost = math.ceil((1.0 + size(args[0])) * STRING_TRAVERSAL)
        return text_cost * math.ceil(size(args[1]) * REGEX_LENGTH)
    if overload == "contains_string":
        return _ceil_tenths(size(args[0])) * _ceil_tenths(size(args[1]))
    return 1


_SIZED = frozenset((str, bytes, list, dict, AccumulatedList))
_SCALARS = frozenset((int, float, bool, UInt, type(None)))


def equality_cost(function: str, left: Any, right: Any, result: Any) -> int:
    """call_cost of `==` or `!=`, quicker for the common operands (strings, numbers)."""
    kind, other = type(left), type(right)
    if kind in _SIZED and other in _SIZED:
        return math.ceil(min(len(left), len(right)) * STRING_TRAVERSAL)
    if kind in _SCALARS and other in _SCALARS:
        return 1
    overload = "equals" if function == "_==_" else "not_equals"
    return call_cost(function, overload, (left, right), result)


def call_cost(function: str, overload: str, args: Sequence[Any], result: Any) -> int:
    """What upstream adds for one call of `function` (resolved to `overload`, or "" when the checker
    left several) over `args` (the receiver first), which returned `result`."""
    cost = _sets(function, args)
    if cost is None:
        cost = _library_cost(function, overload, args, result)
    return cost if cost is not None else _standard_cost(overload, args)
