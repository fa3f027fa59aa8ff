"""Kubernetes' URL library: url(), isURL() and a URL's getScheme, getHost, getHostname, getPort,
getEscapedPath and getQuery, as Go's net/url answers them (see neturl).

url() accepts what url.ParseRequestURI accepts (an absolute URI or an absolute path; a '#' is no
delimiter there) and keeps what url.Parse makes of the string (a fragment cut off). The value held
is the URL as Go writes it back (URL.String): equal URLs are those that write back the same, as
upstream compares them, and each getter reads the URL again from that text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cel_expr_python import cel

from apiserver.cel.library import neturl
from apiserver.cel.library.goescape import URLError
from apiserver.cel.library.gostrings import octets, text_of
from apiserver.cel.library.types import URL, URL_TYPE

T = cel.Type


def _url(text: str) -> Any:
    raw = octets(text)
    try:
        neturl.parse_request_uri(raw)
        parsed = neturl.parse(raw)
    except URLError as failure:
        raise ValueError(f"URL parse error during conversion from string: {failure}") from None
    return URL(value=text_of(neturl.to_string(parsed)))


def _is_url(text: str) -> bool:
    try:
        neturl.parse_request_uri(octets(text))
    except URLError:
        return False
    return True


def _parsed(url: Any) -> neturl.URL:
    return neturl.parse(octets(url.value))


def _query(url: Any) -> dict[str, list[str]]:
    values = neturl.query(_parsed(url).raw_query)
    return {text_of(key): [text_of(value) for value in found] for key, found in values.items()}


def _getter(name: str, overload: str, read: Callable[[neturl.URL], str]) -> Any:
    def get(url: Any) -> str:
        return text_of(read(_parsed(url)))

    return cel.FunctionDecl(name, [cel.Overload(overload, T.STRING, [URL_TYPE], is_member=True, impl=get)])


FUNCTIONS = (
    cel.FunctionDecl("url", [cel.Overload("string_to_url", URL_TYPE, [T.STRING], impl=_url)]),
    cel.FunctionDecl("isURL", [cel.Overload("is_url_string", T.BOOL, [T.STRING], impl=_is_url)]),
    _getter("getScheme", "url_get_scheme", lambda url: url.scheme),
    _getter("getHost", "url_get_host", lambda url: url.host),
    _getter("getHostname", "url_get_hostname", lambda url: neturl.split_host_port(url.host)[0]),
    _getter("getPort", "url_get_port", lambda url: neturl.split_host_port(url.host)[1]),
    _getter("getEscapedPath", "url_get_escaped_path", neturl.escaped_path),
    cel.FunctionDecl(
        "getQuery",
        [
            cel.Overload(
                "url_get_query", T.Map(T.STRING, T.List(T.STRING)), [URL_TYPE], is_member=True, impl=_query
            )
        ],
    ),
)
