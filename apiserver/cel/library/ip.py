"""Kubernetes' IP library: ip(), isIP(), ip.isCanonical() and an address's family and kind
(isUnspecified, isLoopback, isLinkLocalMulticast, isLinkLocalUnicast, isGlobalUnicast), as Go's
net/netip judges them: no zones, no IPv4-mapped IPv6, no leading zeros."""

from __future__ import annotations

import ipaddress
from typing import Any

from cel_expr_python import cel

from apiserver.cel.library.types import IP, IP_TYPE

T = cel.Type
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_LINK_LOCAL_MULTICAST_V4 = ipaddress.ip_network("224.0.0.0/24")
_LINK_LOCAL_MULTICAST_V6 = ipaddress.ip_network("ff02::/16")
_BROADCAST = ipaddress.ip_address("255.255.255.255")


def parse_address(text: str) -> Address:
    """The address `text` names, refused (with upstream's message) as netip.ParseAddr refuses it."""
    if "%" in text:
        raise ValueError(f"IP address {text!r} with zone value is not allowed".replace("'", '"'))
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        detail = f'ParseAddr("{text}"): unable to parse IP'
        raise ValueError(f'IP Address "{text}" parse error during conversion from string: {detail}') from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f'IPv4-mapped IPv6 address "{text}" is not allowed')
    return address


def address_of(ip: Any) -> Address:
    return ipaddress.ip_address(ip.value)


def _ip(text: str) -> Any:
    return IP(value=str(parse_address(text)))


def _is_ip(text: str) -> bool:
    try:
        parse_address(text)
    except ValueError:
        return False
    return True


def _is_canonical(text: str) -> bool:
    return str(parse_address(text)) == text


def _is_link_local_multicast(address: Address) -> bool:
    network = _LINK_LOCAL_MULTICAST_V4 if address.version == 4 else _LINK_LOCAL_MULTICAST_V6
    return address in network


def _is_global_unicast(address: Address) -> bool:
    """Go's meaning: any unicast address that is not loopback, link-local or unspecified
    (private ranges included)."""
    return not (
        address.is_unspecified
        or address.is_loopback
        or address.is_multicast
        or address.is_link_local
        or address == _BROADCAST
    )


def _predicate(name: str, test: Any) -> Any:
    return cel.FunctionDecl(
        name,
        [cel.Overload(f"ip_{name}", T.BOOL, [IP_TYPE], is_member=True, impl=lambda ip: test(address_of(ip)))],
    )


# `ip` is declared with the CIDR library's `<cidr>.ip()`: a name is declared once.
STRING_TO_IP = cel.Overload("string_to_ip", IP_TYPE, [T.STRING], impl=_ip)

FUNCTIONS = (
    cel.FunctionDecl("isIP", [cel.Overload("is_ip", T.BOOL, [T.STRING], impl=_is_ip)]),
    cel.FunctionDecl(
        "ip.isCanonical", [cel.Overload("ip_is_canonical", T.BOOL, [T.STRING], impl=_is_canonical)]
    ),
    cel.FunctionDecl(
        "family",
        [cel.Overload("ip_family", T.INT, [IP_TYPE], is_member=True, impl=lambda ip: address_of(ip).version)],
    ),
    _predicate("isUnspecified", lambda a: a.is_unspecified),
    _predicate("isLoopback", lambda a: a.is_loopback),
    _predicate("isLinkLocalMulticast", _is_link_local_multicast),
    _predicate("isLinkLocalUnicast", lambda a: a.is_link_local),
    _predicate("isGlobalUnicast", _is_global_unicast),
)
