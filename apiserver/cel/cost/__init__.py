"""CEL evaluated with upstream's runtime cost: each evaluation counts what cel-go v0.23.2's cost
tracker counts (with Kubernetes' estimator and options), and stops as upstream stops, with
`operation cancelled: actual cost limit exceeded`, as soon as the count is over the limit.

cel-expr-python counts no cost, so this evaluator walks the checked tree itself (plan.py mirrors
cel-go's planner, tracker.py its cost rules), implementing the common functions in Python and
making the others through cel-expr-python (bridge.py). What it does not implement raises
Unsupported, for the caller to fall back to cel-expr-python without a cost.

In front of it, bound.py (with sizes.py and charges.py) bounds the same cost from above with the
input's real sizes, cheaply, so that Program.run lets the C++ engine run whatever is surely within
the limit, and only the rest comes here.
"""

from apiserver.cel.cost.interpreter import evaluate_with_cost
from apiserver.cel.cost.values import Unsupported

__all__ = ["Unsupported", "evaluate_with_cost"]
