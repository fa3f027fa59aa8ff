"""The CEL environment of admission: Kubernetes' base environment (its extensions and libraries)
with the caller's variables, every one of them dynamically typed."""

from __future__ import annotations

import functools
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_optional, ext_strings

from apiserver.cel.library import FUNCTIONS
from apiserver.cel.library.types import AUTHORIZER_TYPE, POOL, RESOURCE_CHECK_TYPE

# Upstream's base environment has the strings extension at version 2 (since Kubernetes 1.29).
STRINGS_VERSION = 2
# The variables of a type of their own; every other one is dynamically typed.
TYPED = {"authorizer": AUTHORIZER_TYPE, "authorizer.requestResource": RESOURCE_CHECK_TYPE}


@functools.cache
def environment(variables: tuple[str, ...]) -> Any:
    """The environment that compiles expressions over `variables` (one per set of names: building
    it registers every library function)."""
    return cel.NewEnv(
        variables={name: TYPED.get(name, cel.Type.DYN) for name in variables},
        extensions=[ext_strings.ExtStrings(STRINGS_VERSION), ext_optional.ExtOptional()],
        functions=list(FUNCTIONS),
        descriptor_pool=POOL,
    )
