"""Kubernetes' CEL libraries, as Python functions declared to cel-expr-python."""

from __future__ import annotations

from typing import Any

from cel_expr_python import cel

from apiserver.cel.library import authz, cidr, formats, ip, lists, ordering, quantity, regex, semver, urls

FUNCTIONS: tuple[Any, ...] = (
    *lists.FUNCTIONS,
    *quantity.FUNCTIONS,
    *semver.FUNCTIONS,
    *ordering.FUNCTIONS,
    *ip.FUNCTIONS,
    *cidr.FUNCTIONS,
    *authz.FUNCTIONS,
    *regex.FUNCTIONS,
    *urls.FUNCTIONS,
    *formats.FUNCTIONS,
    cel.FunctionDecl("ip", [ip.STRING_TO_IP, cidr.IP_OF_CIDR]),
)
