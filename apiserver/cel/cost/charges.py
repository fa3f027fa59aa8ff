"""What cel-go's runtime cost tracker charges for one call (beside its operands), bounded from the
shapes of the operands, and the shape of what the call returns.

Upstream charges a call by overload in its own switch (interpreter/runtimecost.go: string walks,
`in`, regular expressions) after Kubernetes' estimator, which charges by function name
(k8s.io/apiserver/pkg/cel/library/cost.go); anything neither names costs 1. When the checker leaves
several overloads (dynamic operands) cel-go's call has no overload id and costs 1 unless Kubernetes
names the function: so the charge bounded here is the largest over the overloads it may take, and
never less than 1. Operands are in cel-go's order: a member call's target first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from apiserver.cel.cost.sizes import (
    SCALAR,
    STRING_FACTOR,
    TOP,
    UNBOUNDED,
    Shape,
    Sized,
    union,
)
from apiserver.cel.library.formats import FORMATS, LONGEST_REGEX

Charge = tuple[int, Shape]
Rule = Callable[[Sequence[Shape], tuple[str, ...]], Charge]

# cel-go's factor of a regular expression's length (about one state every 4 characters).
REGEX_FACTOR = 0.25
# The longest string a number, bool, timestamp, duration, IP or CIDR converts to.
LONGEST_SCALAR_STRING = 64
# The size Kubernetes gives an IP address or CIDR: its bytes, 16 at most (IPv6).
ADDRESS_BYTES = 16
# Kubernetes' fixed charge of an authorization check.
AUTHORIZATION_CHECK = 350_000
# The most messages a format's validate returns, and the most characters of one beside the text.
_FORMAT_MESSAGES = 5
_FORMAT_WORDS = 400
# Kubernetes' charges of parsing a label or field selector.
_SELECTOR_BASE = 10
_REQUIREMENT_COST = 10.0 + 40.0
_REQUIREMENTS_PER_CHARACTER = 0.5


def walk_cost(size: int, factor: float = STRING_FACTOR) -> int:
    """ceil(size * factor), computed in floating point as cel-go computes it."""
    if size >= UNBOUNDED:
        return UNBOUNDED
    return math.ceil(float(size) * factor)


def _regex_cost(text: Shape, pattern: Shape) -> int:
    if text.size() >= UNBOUNDED or pattern.size() >= UNBOUNDED:
        return UNBOUNDED
    return walk_cost(1 + text.size()) * walk_cost(pattern.size(), REGEX_FACTOR)


def _unit(result: Shape) -> Rule:
    return lambda shapes, overloads: (1, result)


def _same(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    return 1, shapes[0]


def _either(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    return 1, union(shapes[0], shapes[1])


def _unknown_result(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    return 1, TOP


def _compare(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    smallest = min(shapes[0].size(), shapes[1].size())
    return max(1, walk_cost(smallest)), SCALAR


def _textual(overloads: tuple[str, ...]) -> bool:
    return any("string" in overload or "bytes" in overload for overload in overloads)


def _add(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    left, right = shapes
    sequence = _textual(overloads) or "add_list" in overloads
    if not sequence:
        return 1, SCALAR
    total = left.size() + right.size()
    cost = max(1, walk_cost(total)) if _textual(overloads) else 1
    return cost, Sized(total, union(left.items(), right.items()))


def _in(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    if "in_list" in overloads:
        return max(1, shapes[1].size()), SCALAR
    return 1, SCALAR


def _matches(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    return max(1, _regex_cost(shapes[0], shapes[1])), SCALAR


def _contains(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    whole, part = walk_cost(shapes[0].size()), walk_cost(shapes[1].size())
    return max(1, min(UNBOUNDED, whole * part)), SCALAR


def _walk_target(result: Shape | None = None, factor: float = STRING_FACTOR) -> Rule:
    """A call charged ceil(size(first operand) * factor); its result `result` or as long."""

    def rule(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
        returned = result if result is not None else Sized(shapes[0].size())
        return max(1, walk_cost(shapes[0].size(), factor)), returned

    return rule


def _parsed(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    """quantity(), url(), ip(), cidr(), semver(): a walk of the string, to an object whose own
    strings are no longer than it."""
    return max(1, walk_cost(shapes[0].size())), Sized(1, length=shapes[0].text())


def _address(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    """ip(), cidr(): a walk of the string, to an address Kubernetes sizes in bytes (at most 16)."""
    return max(1, walk_cost(shapes[0].size())), Sized(ADDRESS_BYTES, length=shapes[0].text())


def _part(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    return 1, Sized(shapes[0].text())


def _query(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    longest = shapes[0].text()
    return 1, Sized(longest, Sized(longest), Sized(longest, Sized(longest)))


def _string(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    cost = max(1, walk_cost(shapes[0].size())) if "bytes_to_string" in overloads else 1
    return cost, Sized(max(shapes[0].size(), shapes[0].text(), LONGEST_SCALAR_STRING))


def _bytes(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    cost = max(1, walk_cost(shapes[0].size())) if "string_to_bytes" in overloads else 1
    return cost, Sized(max(shapes[0].size() * 4, LONGEST_SCALAR_STRING))


def _replace(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    length, inserted = shapes[0].size(), shapes[2].size()
    # Replacing the empty string inserts the replacement around every character.
    longest = length + (length + 1) * inserted
    return max(1, walk_cost(length, 2 * STRING_FACTOR)), Sized(longest)


def _split(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    length = shapes[0].size()
    return max(1, walk_cost(length, 2 * STRING_FACTOR)), Sized(length + 1, Sized(length))


def _join(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    count = shapes[0].size()
    separator = shapes[1].size() if len(shapes) > 1 else 0
    longest = count * shapes[0].items().size() + max(0, count - 1) * separator
    return max(1, walk_cost(longest, 2 * STRING_FACTOR)), Sized(longest)


def _quote(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    # At worst every character escaped as \uXXXX, between two quotes.
    return max(1, walk_cost(shapes[0].size())), Sized(shapes[0].size() * 6 + 2)


def _format(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    return max(1, walk_cost(shapes[0].size())), TOP


def _traverse(result: Shape | None) -> Rule:
    """isSorted, sum, min, max, indexOf, lastIndexOf: Kubernetes charges a traversal of the target
    (a string's for indexOf on strings)."""

    def rule(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
        returned = result if result is not None else shapes[0].items()
        return max(1, shapes[0].walk()), returned

    return rule


def _find(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    return max(1, _regex_cost(shapes[0], shapes[1])), Sized(shapes[0].size())


def _find_all(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    length = shapes[0].size()
    return max(1, _regex_cost(shapes[0], shapes[1])), Sized(length + 1, Sized(length))


def _contains_ip(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    network = shapes[0].size()
    return walk_cost(2 * network) + walk_cost(shapes[1].size()), SCALAR


def _contains_cidr(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    network = shapes[0].size()
    masking = walk_cost(network) + 1
    return walk_cost(2 * network) + masking + walk_cost(shapes[1].size()), SCALAR


def _selector(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    length = shapes[-1].size()
    requirements = walk_cost(length, _REQUIREMENTS_PER_CHARACTER)
    return _SELECTOR_BASE + walk_cost(length) + walk_cost(requirements, _REQUIREMENT_COST), SCALAR


def _sets(factor: float) -> Rule:
    """sets.contains, intersects, equivalent: 1, and every pair of elements compared (twice for
    equivalent)."""

    def rule(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
        left, right = shapes[0].size(), shapes[1].size()
        if left >= UNBOUNDED or right >= UNBOUNDED:
            return UNBOUNDED, SCALAR
        return 1 + int(float(left * right) * factor), SCALAR

    return rule


def _validate(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    """A format's validate, as matches against the longest regex any format's cost assumes; what it
    returns is a few messages, each at most a quoted copy of the text (Go's %q writes a byte as
    four characters at most, a code point as ten) and some words."""
    text = shapes[1].size()
    if text >= UNBOUNDED:
        return UNBOUNDED, TOP
    cost = walk_cost(1 + text) * walk_cost(LONGEST_REGEX, REGEX_FACTOR)
    return cost, Sized(_FORMAT_MESSAGES, Sized(16 * shapes[1].text() + _FORMAT_WORDS))


def _check(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    return AUTHORIZATION_CHECK, SCALAR


def _opaque_results() -> dict[str, Rule]:
    """Functions charged 1 whose result is a scalar, or an object of size 1 keeping the text bound
    of its operand (a masked CIDR, a sum of quantities)."""
    scalar = (
        "!_ -_ _-_ _*_ _/_ _%_ @not_strictly_false size int uint double bool timestamp duration type "
        "getFullYear getMonth getDate getDayOfMonth getDayOfYear getDayOfWeek getHours getMinutes "
        "getSeconds getMilliseconds hasValue optional.none charAt isURL family isUnspecified isLoopback "
        "isLinkLocalMulticast isLinkLocalUnicast isGlobalUnicast prefixLength sign asInteger isInteger "
        "asApproximateFloat isGreaterThan isLessThan compareTo major minor patch allowed errored "
        "format.named"
    )
    rules: dict[str, Rule] = dict.fromkeys(scalar.split(), _unit(SCALAR))
    rules.update(dict.fromkeys((f"format.{name}" for name in FORMATS), _unit(SCALAR)))
    for name in ("add", "sub"):
        rules[name] = _keeps_text
    return rules


def _keeps_text(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    return 1, Sized(1, length=max(shape.text() for shape in shapes))


def _ip(shapes: Sequence[Shape], overloads: tuple[str, ...]) -> Charge:
    if "string_to_ip" in overloads:
        return _address(shapes, overloads)
    # A CIDR's address.
    return 1, Sized(ADDRESS_BYTES, length=shapes[0].text())


RULES: dict[str, Rule] = {
    **_opaque_results(),
    "_==_": _compare,
    "_!=_": _compare,
    "_<_": _compare,
    "_<=_": _compare,
    "_>_": _compare,
    "_>=_": _compare,
    "_+_": _add,
    "@in": _in,
    "matches": _matches,
    "contains": _contains,
    "startsWith": _walk_target(SCALAR),
    "endsWith": _walk_target(SCALAR),
    "string": _string,
    "bytes": _bytes,
    "dyn": _same,
    "optional.of": _same,
    "optional.ofNonZeroValue": _same,
    "value": _same,
    "or": _either,
    "orValue": _either,
    "lowerAscii": _walk_target(),
    "upperAscii": _walk_target(),
    "trim": _walk_target(),
    "substring": _walk_target(),
    "replace": _replace,
    "split": _split,
    "join": _join,
    "strings.quote": _quote,
    "format": _format,
    "indexOf": _traverse(SCALAR),
    "lastIndexOf": _traverse(SCALAR),
    "isSorted": _traverse(SCALAR),
    "sum": _traverse(SCALAR),
    "min": _traverse(None),
    "max": _traverse(None),
    "find": _find,
    "findAll": _find_all,
    "url": _parsed,
    "quantity": _parsed,
    "semver": _parsed,
    "cidr": _address,
    "ip": _ip,
    "masked": _ip,
    "isQuantity": _walk_target(SCALAR),
    "isSemver": _walk_target(SCALAR),
    "isIP": _walk_target(SCALAR),
    "isCIDR": _walk_target(SCALAR),
    "ip.isCanonical": _walk_target(SCALAR, 2 * STRING_FACTOR),
    "containsIP": _contains_ip,
    "containsCIDR": _contains_cidr,
    "getScheme": _part,
    "getHost": _part,
    "getHostname": _part,
    "getPort": _part,
    "getEscapedPath": _part,
    "getQuery": _query,
    "check": _check,
    "sets.contains": _sets(1.0),
    "sets.intersects": _sets(1.0),
    "sets.equivalent": _sets(2.0),
    "validate": _validate,
    "fieldSelector": _selector,
    "labelSelector": _selector,
    "reason": _unknown_result,
    # A map: the comprehension's accumulator bounds it (bound.py), not the call.
    "cel.@mapInsert": _unknown_result,
    "error": _unknown_result,
    # The authorizer's builders: objects of size 1.
    **dict.fromkeys(
        ("serviceAccount", "path", "group", "resource", "subresource", "namespace", "name"),
        _unit(SCALAR),
    ),
}


def charge(function: str, overloads: tuple[str, ...], shapes: Sequence[Shape]) -> Charge:
    """The bound of what the call itself costs, and the shape of its result; UNBOUNDED for a
    function not modelled here."""
    rule = RULES.get(function)
    if rule is None:
        return UNBOUNDED, TOP
    return rule(shapes, overloads)
