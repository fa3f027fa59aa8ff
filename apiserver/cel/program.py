"""Compiling an expression once, evaluating it many times."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from apiserver.cel.bounds import ENGINE_ITERATIONS, MAX_MAPPED_LIST, PER_CALL_LIMIT, longest_list, maps_lists
from apiserver.cel.checked import Checked, Ident, Node, Select, checked_tree, walk
from apiserver.cel.cost import Unsupported, evaluate_with_cost
from apiserver.cel.cost.bound import Bound, cost_bound
from apiserver.cel.cost.sizes import Extent, SizeSummary, UniformSummary
from apiserver.cel.environment import compile_checked, environment
from apiserver.cel.errors import CompileError, EvaluationError, compile_message, evaluation_message
from apiserver.cel.values import plain

# An activation of at most this much JSON is bounded by its size class (Extent), one bound a
# class a program; a larger one by its own shapes.
UNIFORM_MOST_BYTES = 256 * 1024
# The largest bound by size class charged as it is: a larger one (loose, for a mid-sized
# activation) is replaced by the activation's own, so that a budget of 10,000,000 is not spent on
# looseness (500 expressions at this bound would be needed to spend it).
UNIFORM_MOST_COST = 20_000
# The size classes a program keeps a bound for.
UNIFORM_BOUNDS_KEPT = 64


class Bindings:
    """Values bound to the variables once, to evaluate several programs over: each variable is
    converted for the engine when first read, once, where evaluating over a plain mapping converts
    all of it for every program (measured: 3 µs instead of 420 µs an evaluation over a RoleBinding
    of 1,000 subjects). The values must not change once bound, and the programs run in the thread
    that bound them (the engine keeps what it converted in that thread's arena)."""

    __slots__ = ("_extent", "data", "native", "sizes")

    def __init__(self, variables: Sequence[str], data: Mapping[str, Any]) -> None:
        self.data = data
        self.native = environment(tuple(variables)).Activation(dict(data))
        # What the cost bounds of the programs learn of the values' sizes, learnt once.
        self.sizes = SizeSummary.of(data)
        self._extent: Extent | bool | None = False

    @property
    def extent(self) -> Extent | None:
        """The values' extent (None for a large activation), measured once."""
        if self._extent is False:
            self._extent = Extent.of(self.data, UNIFORM_MOST_BYTES)
        return self._extent  # type: ignore[return-value]


@dataclass
class Costed:
    """One evaluation: its value or its error, and what it cost as cel-go's tracker counts, exactly
    or (`exact` False) as an upper bound whose exact figure `exact_cost` works out on demand."""

    value: Any
    error: EvaluationError | None
    cost: int
    exact: bool
    pricing: Callable[[], int] | None = None

    def result(self) -> Any:
        """The value, or the evaluation's error raised."""
        if self.error is not None:
            raise self.error
        return self.value

    def exact_cost(self) -> int:
        """The exact cost, worked out now if only a bound was known (or the bound, when no exact
        figure can be had)."""
        if not self.exact and self.pricing is not None:
            self.cost = self.pricing()
        self.exact = True
        return self.cost


class Program:
    """One compiled expression; reusable, and safe to evaluate from any number of requests.

    Each evaluation is held to upstream's per-call cost limit. The fast engine runs it when a
    bound of its cost over the actual input shows it within the limit and within the engine's own
    iteration budget; otherwise the cost-tracking evaluator runs it, and decides exactly."""

    __slots__ = (
        "_checked",
        "_compiled",
        "_maps_lists",
        "_output_type",
        "_uniform_bounds",
        "source",
        "variables_read",
    )

    def __init__(self, source: str, checked: Any, runnable: Any) -> None:
        """`checked` is the expression as the checker left it, `runnable` what the engine runs."""
        self.source = source
        self._compiled = runnable
        self._output_type = go_type_name(checked.return_type().name())
        self._maps_lists = maps_lists(source)
        self._checked: Checked = checked_tree(checked)
        # Bounds over every activation of one extent (Extent.bucket) and set of variables.
        self._uniform_bounds: dict[tuple[tuple[int, int], frozenset[str]], Bound] = {}
        # The fields of `variables` the expression names, in the order first named.
        self.variables_read: tuple[str, ...] = tuple(
            dict.fromkeys(node.field for node in walk(self._checked.expr) if _reads_variable(node))
        )

    def evaluate(self, activation: Mapping[str, Any] | Bindings) -> Any:
        """The expression's value over `activation` (JSON-like values by variable name; None for an
        absent object; or Bindings of the same variables), as plain Python values."""
        return self.run(activation).result()

    def run(self, activation: Mapping[str, Any] | Bindings, limit: int = PER_CALL_LIMIT) -> Costed:
        """The expression evaluated over `activation`, with its cost."""
        data = activation.data if isinstance(activation, Bindings) else activation
        extent = activation.extent if isinstance(activation, Bindings) else None
        bound, engine_safe = None, False
        if extent is not None:
            bound = self._uniform_bound(extent, data)
            long_lists = (
                self._maps_lists and extent.longest_list > MAX_MAPPED_LIST and self._copies_long_lists(data)
            )
            engine_safe = bound.cost <= min(limit, UNIFORM_MOST_COST) and not long_lists
            engine_safe = engine_safe and bound.iterations <= ENGINE_ITERATIONS
        if not engine_safe:
            # No bound for its size class lets the engine run it: this activation's own shapes may.
            sizes = activation.sizes if isinstance(activation, Bindings) else SizeSummary.of(data)
            bound = cost_bound(self._checked, sizes)
            engine_safe = bound.iterations <= ENGINE_ITERATIONS and not self._copies_long_lists(data)
        assert bound is not None
        if bound.bounded and bound.cost <= limit and engine_safe:
            return self._fast(activation, bound.cost, lambda: self._priced(data, limit, bound.cost))
        exact = self._exact(data, limit)
        if exact is None:
            # The cost-tracking evaluator lacks some call: the engine decides, charged the bound
            # when there is one, nothing otherwise.
            return self._fast(activation, bound.cost if bound.bounded else 0, None)
        return exact

    def _uniform_bound(self, extent: Extent, data: Mapping[str, Any]) -> Bound:
        """The bound over every activation of `extent`'s size class: worked out once for it (a
        dictionary lookup afterwards, where a bound from the activation's own shapes walks the
        tree every time), looser but as sound."""
        key = (extent.bucket, frozenset(data))
        bound = self._uniform_bounds.get(key)
        if bound is None:
            if len(self._uniform_bounds) >= UNIFORM_BOUNDS_KEPT:
                self._uniform_bounds.clear()
            bound = self._uniform_bounds[key] = cost_bound(self._checked, UniformSummary(*key))
        return bound

    def _priced(self, data: Mapping[str, Any], limit: int, bound: int) -> int:
        exact = self._exact(data, limit)
        return bound if exact is None else exact.cost

    def _copies_long_lists(self, data: Mapping[str, Any]) -> bool:
        """The engine's map and filter copy the list they build at every step (n*n/2 copies)."""
        return self._maps_lists and longest_list(list(data.values())) > MAX_MAPPED_LIST

    def _exact(self, data: Mapping[str, Any], limit: int) -> Costed | None:
        try:
            value, cost = evaluate_with_cost(self._checked, data, limit)
        except Unsupported:
            return None
        except EvaluationError as exc:
            return Costed(None, exc, exc.cost, True)
        return Costed(value, None, cost, True)

    def _fast(
        self, activation: Mapping[str, Any] | Bindings, bound: int, pricing: Callable[[], int] | None
    ) -> Costed:
        try:
            return Costed(self._engine(activation), None, bound, False, pricing)
        except EvaluationError as exc:
            return Costed(None, exc, bound, False, pricing)

    def _engine(self, activation: Mapping[str, Any] | Bindings) -> Any:
        try:
            if isinstance(activation, Bindings):
                value = self._compiled.eval(activation.native)
            else:
                value = self._compiled.eval(data=dict(activation))
        except (RuntimeError, TypeError, ValueError) as exc:
            raise EvaluationError(evaluation_message(str(exc))) from None
        if value.type().name() == "ERROR":
            raise EvaluationError(evaluation_message(str(value.plain_value())))
        return plain(value.plain_value())

    @property
    def output_type(self) -> str:
        """The type the checker gives the expression, named as cel-go names it (`bool`, `dyn`,
        `list(int)`, `null_type`)."""
        return self._output_type

    def __repr__(self) -> str:
        return f"Program({self.source!r})"


def _reads_variable(node: Node) -> TypeGuard[Select]:
    """`variables.<name>`."""
    return isinstance(node, Select) and isinstance(node.operand, Ident) and node.operand.name == "variables"


_GO_NAMES = {
    "NULL": "null_type",
    "DURATION": "google.protobuf.Duration",
    "TIMESTAMP": "google.protobuf.Timestamp",
}


def go_type_name(name: str) -> str:
    """cel-expr-python's type name (`LIST<INT>`, `MAP<STRING, DYN>`) as cel-go's (`list(int)`)."""
    if name in _GO_NAMES:
        return _GO_NAMES[name]
    for kind in ("LIST", "MAP"):
        if name.startswith(f"{kind}<") and name.endswith(">"):
            inner = name[len(kind) + 1 : -1]
            parts = _split_params(inner)
            return f"{kind.lower()}({', '.join(go_type_name(part) for part in parts)})"
    return name.lower() if name.isupper() else name


def _split_params(text: str) -> list[str]:
    """`STRING, MAP<STRING, INT>` as its two top-level parameters."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return parts


def compile_expression(source: str, variables: Sequence[str]) -> Program:
    """`source` compiled and type-checked over `variables` (each of them dynamically typed)."""
    try:
        checked, runnable = compile_checked(source, tuple(variables))
    except RuntimeError as exc:
        raise CompileError(compile_message(str(exc))) from None
    return Program(source, checked, runnable)
