"""Kubernetes' CIDR library: cidr(), isCIDR(), containsIP, containsCIDR, ip, prefixLength, masked."""

from __future__ import annotations

import ipaddress
from typing import Any

from cel_expr_python import cel

from apiserver.cel.library.ip import address_of, parse_address
from apiserver.cel.library.types import CIDR, CIDR_TYPE, IP, IP_TYPE

T = cel.Type
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _parse(text: str) -> tuple[Any, int]:
    """The address (as written, not masked) and prefix length of `text`."""
    address, slash, length = text.partition("/")
    try:
        parsed = parse_address(address)
        bits = int(length, 10) if slash and length.isdigit() else -1
    except ValueError:
        parsed, bits = None, -1
    if parsed is None or not 0 <= bits <= parsed.max_prefixlen:
        raise ValueError(
            f'network address parse error during conversion from string: netip.ParsePrefix("{text}")'
        )
    return parsed, bits


def _network(cidr: Any) -> Network:
    return ipaddress.ip_network(cidr.value, strict=False)


def _cidr(text: str) -> Any:
    address, bits = _parse(text)
    return CIDR(value=f"{address}/{bits}")


def _is_cidr(text: str) -> bool:
    try:
        _parse(text)
    except ValueError:
        return False
    return True


def _contains_ip(cidr: Any, ip: Any) -> bool:
    address = address_of(ip) if not isinstance(ip, str) else parse_address(ip)
    return address in _network(cidr)


def _contains_cidr(cidr: Any, other: Any) -> bool:
    inner = _network(other if not isinstance(other, str) else _cidr(other))
    outer = _network(cidr)
    return inner.version == outer.version and inner.subnet_of(outer)  # type: ignore[arg-type]


def _member(name: str, returns: Any, impl: Any, *others: Any) -> Any:
    overloads = [
        cel.Overload(f"cidr_{name}_{n}", returns, [CIDR_TYPE, *param], is_member=True, impl=impl)
        for n, param in enumerate(others or [()])
    ]
    return cel.FunctionDecl(name, overloads)


FUNCTIONS = (
    cel.FunctionDecl("cidr", [cel.Overload("string_to_cidr", CIDR_TYPE, [T.STRING], impl=_cidr)]),
    cel.FunctionDecl("isCIDR", [cel.Overload("is_cidr", T.BOOL, [T.STRING], impl=_is_cidr)]),
    _member("containsIP", T.BOOL, _contains_ip, (T.STRING,), (IP_TYPE,)),
    _member("containsCIDR", T.BOOL, _contains_cidr, (T.STRING,), (CIDR_TYPE,)),
    _member("prefixLength", T.INT, lambda c: _network(c).prefixlen),
    _member("masked", CIDR_TYPE, lambda c: CIDR(value=str(_network(c)))),
)

# `ip` and `string` are shared with the IP library's names; declared there by overload.
IP_OF_CIDR = cel.Overload(
    "cidr_ip", IP_TYPE, [CIDR_TYPE], is_member=True, impl=lambda c: IP(value=c.value.split("/")[0])
)
