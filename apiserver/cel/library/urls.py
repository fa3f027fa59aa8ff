"""Kubernetes' URL library: url(), isURL() and a URL's getScheme, getHost, getHostname, getPort,
getEscapedPath and getQuery, as Go's net/url answers them (see neturl).

url() accepts what url.ParseRequestURI accepts (an absolute URI or an absolute path; a '#' is no
delimiter there) and keeps what url.Parse makes of the string (a fragment cut off). The value held
is the URL as Go writes it back (URL.String): equal URLs are those that write back the same, as
upstream compares them, and each getter reads the URL again from that text. Go's String does not
always read back as the same URL (a path made to start with '//' by an escaped slash reads back as a
host): such a URL is held as a NUL, which no URL text holds, and JSON of its text and of the parts
the getters answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

from cel_expr_python import cel

from apiserver.cel.library import neturl
from apiserver.cel.library.goescape import URLError
from apiserver.cel.library.gostrings import octets, text_of
from apiserver.cel.library.types import URL, URL_TYPE

T = cel.Type


class _Parts(NamedTuple):
    """What the getters answer of a URL: its scheme, host, escaped path and raw query."""

    scheme: str
    host: str
    path: str
    query: str


def _parts(url: neturl.URL) -> _Parts:
    return _Parts(url.scheme, url.host, neturl.escaped_path(url), url.raw_query)


def _held(url: neturl.URL) -> str:
    """The URL's value: its text as Go writes it, with its parts when that text reads back as
    other parts."""
    written = neturl.to_string(url)
    try:
        reads_back = _parts(neturl.parse(written)) == _parts(url)
    except URLError:
        reads_back = False
    if reads_back:
        return text_of(written)
    return "\0" + json.dumps([text_of(written), *(text_of(part) for part in _parts(url))])


def _url(text: str) -> Any:
    raw = octets(text)
    try:
        neturl.parse_request_uri(raw)
        parsed = neturl.parse(raw)
    except URLError as failure:
        raise ValueError(f"URL parse error during conversion from string: {failure}") from None
    return URL(value=_held(parsed))


def _is_url(text: str) -> bool:
    try:
        neturl.parse_request_uri(octets(text))
    except URLError:
        return False
    return True


def _read(url: Any) -> _Parts:
    value: str = url.value
    if value.startswith("\0"):
        return _Parts(*json.loads(value[1:])[1:])
    return _Parts(*(text_of(part) for part in _parts(neturl.parse(octets(value)))))


def _query(url: Any) -> dict[str, list[str]]:
    values = neturl.query(octets(_read(url).query))
    return {text_of(key): [text_of(value) for value in found] for key, found in values.items()}


def _split(host: str) -> tuple[str, str]:
    hostname, port = neturl.split_host_port(octets(host))
    return text_of(hostname), text_of(port)


def _getter(name: str, overload: str, read: Callable[[_Parts], str]) -> Any:
    def get(url: Any) -> str:
        return read(_read(url))

    return cel.FunctionDecl(name, [cel.Overload(overload, T.STRING, [URL_TYPE], is_member=True, impl=get)])


FUNCTIONS = (
    cel.FunctionDecl("url", [cel.Overload("string_to_url", URL_TYPE, [T.STRING], impl=_url)]),
    cel.FunctionDecl("isURL", [cel.Overload("is_url_string", T.BOOL, [T.STRING], impl=_is_url)]),
    _getter("getScheme", "url_get_scheme", lambda parts: parts.scheme),
    _getter("getHost", "url_get_host", lambda parts: parts.host),
    _getter("getHostname", "url_get_hostname", lambda parts: _split(parts.host)[0]),
    _getter("getPort", "url_get_port", lambda parts: _split(parts.host)[1]),
    _getter("getEscapedPath", "url_get_escaped_path", lambda parts: parts.path),
    cel.FunctionDecl(
        "getQuery",
        [
            cel.Overload(
                "url_get_query", T.Map(T.STRING, T.List(T.STRING)), [URL_TYPE], is_member=True, impl=_query
            )
        ],
    ),
)
