"""Go's net/url, as Kubernetes 1.33 builds it (Go 1.24 and 1.25 with their security releases):
Parse, ParseRequestURI, String, EscapedPath, Hostname, Port and Query. Written by hand because
Python's urllib parses and escapes differently (what it accepts, how it splits a host, which
characters each part escapes), and CEL's answers must be Go's.

Go works on a string's bytes, so this does too: every string here is an octet string (see
gostrings), each character one byte of the UTF-8 text. Percent-escapes decode to bytes, and escaping
writes each byte of a non-ASCII character as its own %XX, as Go does.

Hosts follow the security releases (Go 1.24.8, 1.25.2): a bracketed host must be an IPv6 address.
They do not follow Go 1.26, which also refuses a second colon in an http(s) host.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from apiserver.cel.library import goaddr
from apiserver.cel.library.goescape import (
    FRAGMENT,
    HOST,
    PATH,
    QUERY_COMPONENT,
    USER_PASSWORD,
    ZONE,
    URLError,
    escape,
    unescape,
    valid_encoded,
)
from apiserver.cel.library.gostrings import go_quote

_SCHEME_LETTERS = frozenset(string.ascii_letters)
_SCHEME_LATER = frozenset(string.digits + "+-.")
_USERINFO = frozenset(string.ascii_letters + string.digits + "-._:~!$&'()*+,;=%@")
# Go refuses a query of more parameters than this (Go 1.24.12, 1.25.6).
_MAX_QUERY_PARAMETERS = 10000


@dataclass
class URL:
    """Go's url.URL; `user` is (username, password or None) when the URL has userinfo."""

    scheme: str = ""
    opaque: str = ""
    user: tuple[str, str | None] | None = None
    host: str = ""
    path: str = ""
    raw_path: str = ""
    omit_host: bool = False
    force_query: bool = False
    raw_query: str = ""
    fragment: str = ""
    raw_fragment: str = ""


def parse(raw: str) -> URL:
    """url.Parse: any URL reference, a fragment after the first '#'."""
    head, hash_mark, fragment = raw.partition("#")
    try:
        url = _parse(head, via_request=False)
    except URLError as failure:
        raise URLError(f"parse {go_quote(head)}: {failure}") from None
    if hash_mark and fragment:
        try:
            url.fragment, url.raw_fragment = _with_hint(fragment, FRAGMENT)
        except URLError as failure:
            raise URLError(f"parse {go_quote(raw)}: {failure}") from None
    return url


def parse_request_uri(raw: str) -> URL:
    """url.ParseRequestURI: an absolute URI or an absolute path; a '#' is no delimiter."""
    try:
        return _parse(raw, via_request=True)
    except URLError as failure:
        raise URLError(f"parse {go_quote(raw)}: {failure}") from None


def _scheme(raw: str) -> tuple[str, str]:
    """The scheme (`[a-zA-Z][a-zA-Z0-9+-.]*` before a ':') and the rest; no scheme if none such."""
    for index, char in enumerate(raw):
        if char in _SCHEME_LETTERS:
            continue
        if char in _SCHEME_LATER:
            if index == 0:
                return "", raw
            continue
        if char == ":":
            if index == 0:
                raise URLError("missing protocol scheme")
            return raw[:index], raw[index + 1 :]
        return "", raw
    return "", raw


def _parse(raw: str, *, via_request: bool) -> URL:
    if any(char < " " or char == "\x7f" for char in raw):
        raise URLError("net/url: invalid control character in URL")
    if not raw and via_request:
        raise URLError("empty url")
    url = URL()
    if raw == "*":
        url.path = "*"
        return url
    scheme, rest = _scheme(raw)
    url.scheme = scheme.lower()
    if rest.endswith("?") and rest.count("?") == 1:
        url.force_query, rest = True, rest[:-1]
    else:
        rest, _, url.raw_query = rest.partition("?")
    if not rest.startswith("/"):
        if url.scheme:
            url.opaque = rest  # a rootless path: opaque
            return url
        if via_request:
            raise URLError("invalid URI for request")
        if ":" in rest.partition("/")[0]:
            raise URLError("first path segment in URL cannot contain colon")
    if (url.scheme or (not via_request and not rest.startswith("///"))) and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        url.user, url.host = _authority(authority)
        rest = slash + path
    elif url.scheme and rest.startswith("/"):
        url.omit_host = True
    url.path, url.raw_path = _with_hint(rest, PATH)
    return url


def _with_hint(encoded: str, mode: int) -> tuple[str, str]:
    """The decoded value and, when its default escaping is not `encoded`, `encoded` as a hint."""
    decoded = unescape(encoded, mode)
    return decoded, "" if escape(decoded, mode) == encoded else encoded


def _authority(authority: str) -> tuple[tuple[str, str | None] | None, str]:
    userinfo, at, host_port = authority.rpartition("@")
    host = _host(host_port)
    if not at:
        return None, host
    if any(char not in _USERINFO for char in userinfo):
        raise URLError("net/url: invalid userinfo")
    username, colon, password = userinfo.partition(":")
    username = unescape(username, USER_PASSWORD)
    return (username, unescape(password, USER_PASSWORD) if colon else None), host


def _host(host: str) -> str:
    """The host[:port] of an authority, unescaped; a bracketed host must be an IPv6 address."""
    opening = host.rfind("[")
    if opening > 0:
        raise URLError("invalid IP-literal")
    if opening == 0:
        return _bracketed_host(host)
    colon = host.rfind(":")
    if colon >= 0 and not valid_optional_port(host[colon:]):
        raise URLError(f"invalid port {go_quote(host[colon:])} after host")
    return unescape(host, HOST)


def _bracketed_host(host: str) -> str:
    closing = host.rfind("]")
    if closing < 0:
        raise URLError("missing ']' in host")
    colon_port = host[closing + 1 :]
    if not valid_optional_port(colon_port):
        raise URLError(f"invalid port {go_quote(colon_port)} after host")
    colon_port = unescape(colon_port, HOST)
    literal = host[1:closing]
    zone = literal.find("%25")
    if zone >= 0:
        address = unescape(literal[:zone], HOST) + unescape(literal[zone:], ZONE)
    else:
        address = unescape(literal, HOST)
    try:
        is_ipv4 = goaddr.is_ipv4(address)
    except goaddr.AddrError as failure:
        raise URLError(f"invalid host: {failure}") from None
    if is_ipv4:
        raise URLError("invalid IP-literal")
    return f"[{address}]{colon_port}"


def valid_optional_port(port: str) -> bool:
    """Whether `port` is empty or a ':' and decimal digits (maybe none)."""
    return not port or (port[0] == ":" and all("0" <= char <= "9" for char in port[1:]))


def escaped_path(url: URL) -> str:
    """URL.EscapedPath: the raw path when it is a valid escaping of the path, else the path
    escaped by default."""
    if url.raw_path and valid_encoded(url.raw_path, PATH) and _decodes_to(url.raw_path, PATH, url.path):
        return url.raw_path
    if url.path == "*":
        return "*"
    return escape(url.path, PATH)


def _escaped_fragment(url: URL) -> str:
    raw = url.raw_fragment
    if raw and valid_encoded(raw, FRAGMENT) and _decodes_to(raw, FRAGMENT, url.fragment):
        return raw
    return escape(url.fragment, FRAGMENT)


def _decodes_to(encoded: str, mode: int, decoded: str) -> bool:
    try:
        return unescape(encoded, mode) == decoded
    except URLError:
        return False


def _userinfo(user: tuple[str, str | None]) -> str:
    username, password = user
    written = escape(username, USER_PASSWORD)
    return written if password is None else f"{written}:{escape(password, USER_PASSWORD)}"


def to_string(url: URL) -> str:
    """URL.String: the URL reassembled, each part escaped as Go escapes it."""
    out = f"{url.scheme}:" if url.scheme else ""
    if url.opaque:
        out += url.opaque
    else:
        if (url.scheme or url.host or url.user is not None) and not (
            url.omit_host and not url.host and url.user is None
        ):
            if url.host or url.path or url.user is not None:
                out += "//"
            if url.user is not None:
                out += _userinfo(url.user) + "@"
            out += escape(url.host, HOST)
        path = escaped_path(url)
        if path and path[0] != "/" and url.host:
            out += "/"
        if not out and ":" in path.partition("/")[0]:
            out += "./"  # a first segment with a colon would read as a scheme
        out += path
    if url.force_query or url.raw_query:
        out += "?" + url.raw_query
    if url.fragment:
        out += "#" + _escaped_fragment(url)
    return out


def split_host_port(host_port: str) -> tuple[str, str]:
    """URL.Hostname and URL.Port: a valid numeric port split off, brackets removed."""
    host, port = host_port, ""
    colon = host.rfind(":")
    if colon >= 0 and valid_optional_port(host[colon:]):
        host, port = host[:colon], host[colon + 1 :]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def query(raw_query: str) -> dict[str, list[str]]:
    """URL.Query: the query's values by key, malformed pairs silently left out."""
    values: dict[str, list[str]] = {}
    if raw_query.count("&") + 1 > _MAX_QUERY_PARAMETERS:
        return values
    for pair in raw_query.split("&"):
        if not pair or ";" in pair:
            continue
        key, _, value = pair.partition("=")
        try:
            key, value = unescape(key, QUERY_COMPONENT), unescape(value, QUERY_COMPONENT)
        except URLError:
            continue
        values.setdefault(key, []).append(value)
    return values
