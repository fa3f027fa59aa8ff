"""The CEL environment of admission: Kubernetes' base environment (its extensions and libraries)
with the caller's variables, every one of them dynamically typed.

It is built twice over the same variables. The checker's declares every function as upstream
declares it; the engine's runs what the checker accepted, with the functions cel-expr-python cannot
run as declared (generic overloads, results that are optionals) declared again in a form it can
run (library/dispatch.py, checked/rewrite.py). An expression is checked in the first, and the
checked tree, rewritten where needed, is loaded into the second.
"""

from __future__ import annotations

import functools
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_optional, ext_strings

from apiserver.cel.checked.rewrite import Replacement, rewrite
from apiserver.cel.library import FUNCTIONS, dispatch, formats
from apiserver.cel.library.types import AUTHORIZER_TYPE, POOL, RESOURCE_CHECK_TYPE

# Upstream's base environment has the strings extension at version 2 (since Kubernetes 1.29).
STRINGS_VERSION = 2
# The variables of a type of their own; every other one is dynamically typed.
TYPED = {"authorizer": AUTHORIZER_TYPE, "authorizer.requestResource": RESOURCE_CHECK_TYPE}
# cel-go's sets extension (1.29) and two-variable comprehensions (1.32), which cel-expr-python
# knows by name; the engine needs no macros, only the sets' functions.
_ENGINE_EXTENSIONS = "extensions:\n  - name: sets\n"
_CHECKER_EXTENSIONS = (
    _ENGINE_EXTENSIONS + "  - name: two-var-comprehensions\nfunctions:" + formats.DECLARATIONS
)
# The calls whose optional results the engine builds with optional.ofNonZeroValue.
_REWRITES = {
    "format-validate": Replacement(formats.ERRORS, "kubernetes_format_errors"),
    "format-named": Replacement(formats.LOOKUP, "kubernetes_format_lookup"),
}


def _environment(config: str, variables: tuple[str, ...], searches: Any, functions: list[Any]) -> Any:
    return cel.NewEnv(
        config=cel.NewEnvConfigFromYaml(config),
        variables={name: TYPED.get(name, cel.Type.DYN) for name in variables},
        # The lists library's indexOf and lastIndexOf after the strings extension's: cel-expr-python
        # then adds their overloads to the strings' (declared the other way round, it refuses).
        extensions=[
            ext_strings.ExtStrings(STRINGS_VERSION),
            ext_optional.ExtOptional(),
            cel.CelExtension("kubernetes.lists", list(searches)),
        ],
        functions=functions,
        descriptor_pool=POOL,
    )


@functools.cache
def checker(variables: tuple[str, ...]) -> Any:
    """The environment that type-checks expressions over `variables`."""
    return _environment(_CHECKER_EXTENSIONS, variables, dispatch.CHECKED_LIST_SEARCHES, list(FUNCTIONS))


@functools.cache
def environment(variables: tuple[str, ...]) -> Any:
    """The environment that evaluates expressions over `variables` (one per set of names: building
    it registers every library function)."""
    functions = [*FUNCTIONS, *formats.RUNTIME_FUNCTIONS, dispatch.MAP_INSERT]
    return _environment(_ENGINE_EXTENSIONS, variables, dispatch.LIST_SEARCHES, functions)


def compile_checked(source: str, variables: tuple[str, ...]) -> tuple[Any, Any]:
    """`source` type-checked over `variables` (RuntimeError with the checker's report if it does
    not check): the checked expression, and the expression the engine evaluates."""
    checked = checker(variables).compile(source)
    runnable = environment(variables).deserialize(rewrite(checked.serialize(), _REWRITES))
    return checked, runnable
