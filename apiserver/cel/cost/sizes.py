"""What a cost bound knows of the values an expression node may take: their sizes, as cel-go's cost
tracker measures them (`actualSize`: characters of a string, bytes, elements of a list or map, 1 for
anything else), and what their members may be.

A shape is either observed (the very values of the request, found by following the expression
from a variable: exact, and computed only for the paths an expression reads) or estimated (a bound
derived from operands, as cel-go's static estimator derives one). Every figure is an upper bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

# A size or cost at or beyond this is no bound at all.
UNBOUNDED = 1 << 62
# cel-go's factor of the cost of walking a string, and of its traversal of a value (lists library).
STRING_FACTOR = 0.1


class Shape:
    """A set of values one node may take, described by upper bounds."""

    __slots__ = ()

    def size(self) -> int:
        """At least cel-go's `actualSize` of any of the values."""
        raise NotImplementedError

    def text(self) -> int:
        """At least the length of a string taken from any of the values (a URL's host, a string's
        own length)."""
        return self.size()

    def items(self) -> Shape:
        """The elements of the lists and keys of the maps: what one iteration variable takes."""
        raise NotImplementedError

    def values(self) -> Shape:
        """The elements of the lists and values of the maps: what an index reads."""
        raise NotImplementedError

    def field(self, name: str) -> Shape:
        """What `value.name` or `value['name']` reads."""
        return self.values()

    def walk(self) -> int:
        """At least the Kubernetes lists library's traversal cost of any of the values."""
        raise NotImplementedError


class Sized(Shape):
    """Values known only by bounds: a literal, a call's result. Without members described, a Sized
    is a scalar or string (its traversal is its length's)."""

    __slots__ = ("bound", "fields", "item", "length", "value")

    def __init__(
        self,
        bound: int,
        item: Shape | None = None,
        value: Shape | None = None,
        *,
        fields: Mapping[str, Shape] | None = None,
        length: int | None = None,
    ) -> None:
        self.bound = min(bound, UNBOUNDED)
        self.item = item
        self.value = value
        self.fields = fields
        self.length = length

    def size(self) -> int:
        return self.bound

    def text(self) -> int:
        return self.bound if self.length is None else self.length

    def items(self) -> Shape:
        return self.item if self.item is not None else TOP

    def values(self) -> Shape:
        if self.value is not None:
            return self.value
        return self.items()

    def field(self, name: str) -> Shape:
        if self.fields is not None and name in self.fields:
            return self.fields[name]
        return self.values()

    def walk(self) -> int:
        if self.bound >= UNBOUNDED:
            return UNBOUNDED
        if self.item is None and self.value is None:
            # A string: the traversal counts its UTF-8 bytes, at most 4 a character.
            return max(1, int(float(self.bound) * 4 * STRING_FACTOR))
        members = self.items().walk() + (self.value.walk() if self.value is not None else 0)
        return self.bound * max(1, members)


class Uniform(Shape):
    """Any value of an activation known only by its extent: at most `bound` characters or
    entries, at most `traversal` to traverse, and so is everything within it."""

    __slots__ = ("bound", "traversal")

    def __init__(self, bound: int, traversal: int) -> None:
        self.bound = bound
        self.traversal = traversal

    def size(self) -> int:
        return self.bound

    def items(self) -> Shape:
        return self

    def values(self) -> Shape:
        return self

    def field(self, name: str) -> Shape:
        return self

    def walk(self) -> int:
        return self.traversal


# Nothing known: every bound is UNBOUNDED.
TOP: Shape = Uniform(UNBOUNDED, UNBOUNDED)
SCALAR: Shape = Sized(1)
EMPTY: Shape = Sized(0)


class Union(Shape):
    """Values that may come from either of two shapes (the branches of `?:`, a list's elements)."""

    __slots__ = ("left", "right")

    def __init__(self, left: Shape, right: Shape) -> None:
        self.left = left
        self.right = right

    def size(self) -> int:
        return max(self.left.size(), self.right.size())

    def text(self) -> int:
        return max(self.left.text(), self.right.text())

    def items(self) -> Shape:
        return union(self.left.items(), self.right.items())

    def values(self) -> Shape:
        return union(self.left.values(), self.right.values())

    def field(self, name: str) -> Shape:
        return union(self.left.field(name), self.right.field(name))

    def walk(self) -> int:
        return max(self.left.walk(), self.right.walk())


def union(left: Shape, right: Shape) -> Shape:
    """The shape of values from `left` or `right`."""
    if left is right or right is EMPTY:
        return left
    if left is TOP or right is TOP:
        return TOP
    if left is EMPTY:
        return right
    return Union(left, right)


def union_all(shapes: Sequence[Shape]) -> Shape:
    """The shape of values from any of `shapes` (EMPTY for none)."""
    result = EMPTY
    for shape in shapes:
        result = union(result, shape)
    return result


class Observed(Shape):
    """The very values a node takes in one request: a variable's value, and what following fields,
    indexes and iteration from it reaches (every element of a list an iteration variable ranges
    over). Each derived set is computed once, when first asked for, and kept."""

    __slots__ = ("_derived", "_size", "_walk", "members", "partial")

    def __init__(self, members: Sequence[Any], partial: bool = False) -> None:
        self.members = members
        # Some values may be missing (a field absent from an element): cel-go then holds an error,
        # whose size is 1.
        self.partial = partial
        self._size = -1
        self._walk = -1
        self._derived: dict[str, Observed] = {}

    def size(self) -> int:
        if self._size < 0:
            self._size = _longest(self.members, self.partial)
        return self._size

    def items(self) -> Shape:
        return self._derive("@items", lambda: _members(self.members, keys=True))

    def values(self) -> Shape:
        return self._derive("@values", lambda: _members(self.members, keys=False))

    def field(self, name: str) -> Shape:
        return self._derive(name, lambda: _fields(self.members, name))

    def walk(self) -> int:
        if self._walk < 0:
            self._walk = max(map(traversal, self.members), default=0)
        return self._walk

    def _derive(self, key: str, make: Any) -> Observed:
        derived = self._derived.get(key)
        if derived is None:
            members, partial = make()
            derived = self._derived[key] = Observed(members, partial or self.partial)
        return derived


def _longest(members: Sequence[Any], partial: bool) -> int:
    floor = 1 if partial else 0
    try:
        # Strings, bytes, lists and maps: the common case, at the speed of len.
        return max(floor, max(map(len, members), default=0))
    except TypeError:
        return max(floor, max(map(_size, members), default=0))


def _size(value: Any) -> int:
    if isinstance(value, str | bytes | bytearray | list | tuple | dict):
        return len(value)
    return 1


def _members(members: Sequence[Any], *, keys: bool) -> tuple[Sequence[Any], bool]:
    if len(members) == 1:
        only = members[0]
        if isinstance(only, list | tuple):
            return only, False
        if isinstance(only, dict):
            return list(only if keys else only.values()), False
        return (), True
    found: list[Any] = []
    for member in members:
        if isinstance(member, list | tuple):
            found.extend(member)
        elif isinstance(member, dict):
            found.extend(member if keys else member.values())
    return found, False


def _fields(members: Sequence[Any], name: str) -> tuple[Sequence[Any], bool]:
    try:
        return [member[name] for member in members], False
    except (KeyError, TypeError, IndexError):
        found = [member[name] for member in members if isinstance(member, dict) and name in member]
        return found, len(found) < len(members)


def traversal(value: Any) -> int:
    """The Kubernetes lists library's traversal cost of `value` (`traversalCost`): a string's UTF-8
    bytes times 0.1, rounded down; the sum over a list's elements or a map's keys and values; 1
    for anything else."""
    if isinstance(value, str):
        length = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
        return int(float(length) * STRING_FACTOR)
    if isinstance(value, bytes | bytearray):
        return int(float(len(value)) * STRING_FACTOR)
    if isinstance(value, list | tuple):
        return sum(map(traversal, value))
    if isinstance(value, dict):
        return sum(traversal(key) + traversal(item) for key, item in value.items())
    return 1


class SizeSummary:
    """The shapes of one request's variables. Made once per request (per activation) and passed to
    every expression of the policy, so what one expression measured (the elements of
    `object.subjects`, their names' lengths) the next reuses. The values must not change meanwhile."""

    __slots__ = ("_activation", "_shapes")

    def __init__(self, activation: Mapping[str, Any]) -> None:
        self._activation = activation
        self._shapes: dict[str, Shape] = {}

    @classmethod
    def of(cls, activation: Mapping[str, Any]) -> SizeSummary:
        return cls(activation)

    def variable(self, name: str) -> Shape:
        """The shape of the variable `name` (TOP for a variable the activation lacks)."""
        shape = self._shapes.get(name)
        if shape is None:
            shape = Observed((self._activation[name],)) if name in self._activation else TOP
            self._shapes[name] = shape
        return shape


class Extent:
    """How large an activation is anywhere in it, as upper bounds read off its JSON: its longest
    list or map (entries: at most the commas, plus one), its longest string (characters: at most
    the longest run between two quotes, when no quote is escaped), its whole traversal (at most its
    JSON's length). `bucket` rounds them up to powers of two, so that requests of one size class
    share the bound worked out for the first of them (Program.run)."""

    __slots__ = ("bucket", "longest_list")

    def __init__(self, longest_list: int, longest_text: int, traversal: int) -> None:
        self.longest_list = longest_list
        self.bucket = (_power_of_two(max(longest_list, longest_text)), _power_of_two(traversal))

    @classmethod
    def of(cls, activation: Mapping[str, Any], most_bytes: int) -> Extent | None:
        """The activation's extent; None when its JSON is longer than `most_bytes` (then a bound
        from its own shapes is worth its walk) or it holds what JSON cannot."""
        try:
            dumped = orjson.dumps(activation, default=_opaque, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:
            return None
        if len(dumped) > most_bytes:
            return None
        escaped = b'\\"' in dumped
        longest_text = len(dumped) if escaped else max(map(len, dumped.split(b'"')))
        return cls(dumped.count(b",") + 1, longest_text, len(dumped))


def _opaque(value: Any) -> None:
    """A value JSON has no form for (a library value, a message): one of size 1, written `null`."""
    if hasattr(value, "DESCRIPTOR"):
        return None
    raise TypeError(type(value).__name__)


def _power_of_two(value: int) -> int:
    return 1 << max(value, 1).bit_length() if value & (value - 1) else max(value, 1)


class UniformSummary(SizeSummary):
    """Every variable of an activation as one Uniform shape of its extent's bucket (absent ones
    TOP, as SizeSummary has them): a bound over it holds for every activation of that bucket."""

    __slots__ = ("_present", "_shape")

    def __init__(self, bucket: tuple[int, int], present: frozenset[str]) -> None:
        super().__init__({})
        self._shape = Uniform(*bucket)
        self._present = present

    def variable(self, name: str) -> Shape:
        return self._shape if name in self._present else TOP
