"""The URL library (url, isURL and the getters): upstream's cases (apiextensions' validation
tests and the library's cost tests, k8s.io/apiserver v0.33.13) and edge cases of Go's net/url,
each checked against upstream's library."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.cel import CompileError, EvaluationError, compile_expression
from apiserver.cel.library import neturl

BAD = "URL parse error during conversion from string: parse "


def evaluate(source: str) -> Any:
    return compile_expression(source, ["self"]).evaluate(
        {"self": {"url": "https://kubernetes.io:80/docs/home?k1=a&k2=b&k2=c"}}
    )


UPSTREAM = [
    "url('/path').getScheme() == ''",
    "url('https://example.com/').getScheme() == 'https'",
    "url('https://example.com:80/').getHost() == 'example.com:80'",
    "url('https://example.com/').getHost() == 'example.com'",
    "url('https://[::1]:80/').getHost() == '[::1]:80'",
    "url('https://[::1]/').getHost() == '[::1]'",
    "url('/path').getHost() == ''",
    "url('https://example.com:80/').getHostname() == 'example.com'",
    "url('https://127.0.0.1/').getHostname() == '127.0.0.1'",
    "url('https://[::1]/').getHostname() == '::1'",
    "url('/path').getHostname() == ''",
    "url('https://example.com:80/').getPort() == '80'",
    "url('https://example.com/').getPort() == ''",
    "url('/path').getPort() == ''",
    "url('https://example.com/path').getEscapedPath() == '/path'",
    "url('https://example.com/with space/').getEscapedPath() == '/with%20space/'",
    "url('https://example.com').getEscapedPath() == ''",
    "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == { 'k1': ['a'], 'k2': ['b', 'c']}",
    "url('https://example.com/path?key with spaces=value with spaces').getQuery()"
    " == { 'key with spaces': ['value with spaces']}",
    "url('https://example.com/path?').getQuery() == {}",
    "url('https://example.com/path').getQuery() == {}",
    "url(self.url).getScheme() == 'https'",
    "url(self.url).getHost() == 'kubernetes.io:80'",
    "url(self.url).getHostname() == 'kubernetes.io'",
    "url(self.url).getPort() == '80'",
    "url(self.url).getEscapedPath() == '/docs/home'",
    "url(self.url).getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
    "isURL('https://user:pass@example.com:80/path?query=val#fragment')",
    "isURL('/path') == true",
    "isURL('https://a:b:c/') == false",
    "isURL('../relative-path') == false",
    "url('https:://kubernetes.io/').getHostname() != 'test'",
    "url('https:://kubernetes.io/') == url('https:://kubernetes.io/')",
    "url('https:://kubernetes.io/') != url('http://x.b')",
]


@pytest.mark.parametrize("source", UPSTREAM)
def test_upstream_cases_hold(source: str) -> None:
    assert evaluate(source) is True


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # Parse keeps what ParseRequestURI only checked: the fragment is cut off.
        ("url('https://a/b?x=1#frag').getQuery()", {"x": ["1"]}),
        ("url('https://a/b#frag').getEscapedPath()", "/b"),
        ("url('http://a/b#c') == url('http://a/b#c')", True),
        ("url('http://a/b#c') == url('http://a/b')", False),
        ("url('http://a/b#') == url('http://a/b')", True),
        ("url('https://a/%C3%A9') == url('https://a/\u00e9')", True),
        ("url('HTTPS://A/').getScheme()", "https"),
        ("url('HTTPS://A/').getHost()", "A"),
        ("url('//host/p').getHost()", "host"),
        ("url('mailto:me@x.com').getEscapedPath()", ""),
        ("url('*').getEscapedPath()", "*"),
        ("url('https:/p').getHost()", ""),
        ("url('https://u:p@h:1/').getHost()", "h:1"),
        ("url('https://h:/').getPort()", ""),
        ("url('https://h:/').getHostname()", "h"),
        ("url('https://[fe80::1%25en0]:8080/').getHostname()", "fe80::1%en0"),
        ("url('https://[::ffff:1.2.3.4]/').getHostname()", "::ffff:1.2.3.4"),
        ("url('https://\u00fc.com/').getHost()", "\u00fc.com"),
        ("url('https://%C3%BC.com/').getHost()", "\u00fc.com"),
        # The raw path is kept when it is a valid escaping of the path, else the path is escaped.
        ("url('https://a/b%2Fc').getEscapedPath()", "/b%2Fc"),
        ("url('https://a/b%2fc').getEscapedPath()", "/b%2fc"),
        ("url('https://a/\u00e9').getEscapedPath()", "/%C3%A9"),
        ("url('https://a/[x]!$;,').getEscapedPath()", "/[x]!$;,"),
        ("url('https://a/%5Bx%5D').getEscapedPath()", "/%5Bx%5D"),
        ("url('https://a/x y%2F').getEscapedPath()", "/x%20y/"),
        ("url('https://a/a|b').getEscapedPath()", "/a%7Cb"),
        ("url('/%2F%2Fh/p').getEscapedPath()", "/%2F%2Fh/p"),
        ("url('/%2F%2Fh/p').getHost()", ""),
        ("url('/a?x=1;y=2&z=3').getQuery()", {"z": ["3"]}),
        ("url('/a?x=%zz&y=+%41&&=v&k').getQuery()", {"y": [" A"], "": ["v"], "k": [""]}),
        ("url('/a?x=1&x=2&x').getQuery()", {"x": ["1", "2", ""]}),
        ("url('/a??').getQuery()", {"?": [""]}),
        ("isURL('')", False),
        ("isURL('*')", True),
        ("isURL('https:foo')", True),
        ("isURL('https://example.com#frag')", False),
    ],
)
def test_edge_cases(source: str, expected: Any) -> None:
    assert evaluate(source) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("url('../relative-path')", BAD + '"../relative-path": invalid URI for request'),
        ("url('')", BAD + '"": empty url'),
        ("url(':x')", BAD + '":x": missing protocol scheme'),
        ("url('https://a:b:c/')", BAD + '"https://a:b:c/": invalid port ":c" after host'),
        ("url('https://h:8x/')", BAD + '"https://h:8x/": invalid port ":8x" after host'),
        ("url('https://example.com#f')", BAD + '"https://example.com#f": invalid character "#" in host name'),
        ("url('//a b/x')", BAD + '"//a b/x": invalid character " " in host name'),
        ("url('https://a%2Fb/')", BAD + '"https://a%2Fb/": invalid URL escape "%2F"'),
        ("url('https://a/%zz')", BAD + '"https://a/%zz": invalid URL escape "%zz"'),
        ("url('https://a/%4')", BAD + '"https://a/%4": invalid URL escape "%4"'),
        ("url('https://h/p#%zz')", BAD + '"https://h/p#%zz": invalid URL escape "%zz"'),
        ("url('https://a/\\u0001')", BAD + '"https://a/\\x01": net/url: invalid control character in URL'),
        ("url('https://u^@h/')", BAD + '"https://u^@h/": net/url: invalid userinfo'),
        ("url('https://[::1/')", BAD + "\"https://[::1/\": missing ']' in host"),
        ("url('https://[::1]x/')", BAD + '"https://[::1]x/": invalid port "x" after host'),
        ("url('https://x[::1]/')", BAD + '"https://x[::1]/": invalid IP-literal'),
        ("url('https://[1.2.3.4]/')", BAD + '"https://[1.2.3.4]/": invalid IP-literal'),
        (
            "url('https://[::1%25]/')",
            BAD + '"https://[::1%25]/": invalid host: ParseAddr("::1%"): zone must be a non-empty string',
        ),
        (
            "url('https://[12345::]/')",
            BAD + '"https://[12345::]/": invalid host: ParseAddr("12345::"): '
            'each group must have 4 or less digits (at "12345::")',
        ),
        (
            "url('https://[::1.2.3]/')",
            BAD + '"https://[::1.2.3]/": invalid host: ParseAddr("::1.2.3"): IPv4 address too short',
        ),
        (
            "url('https://[1:2:3:4:5:6:7:8:9]/')",
            BAD + '"https://[1:2:3:4:5:6:7:8:9]/": invalid host: ParseAddr("1:2:3:4:5:6:7:8:9"): '
            'trailing garbage after address (at "9")',
        ),
        ("url('https://[x]/')", BAD + '"https://[x]/": invalid host: ParseAddr("x"): unable to parse IP'),
    ],
)
def test_bad_urls_fail_as_upstream_words_them(source: str, message: str) -> None:
    with pytest.raises(EvaluationError) as failure:
        evaluate(source)
    assert str(failure.value) == message


@pytest.mark.parametrize("source", ["url(1)", "isURL(url('/a'))", "'x'.getQuery()"])
def test_wrong_arguments_are_refused_by_the_checker(source: str) -> None:
    with pytest.raises(CompileError, match="found no matching overload"):
        evaluate(source)


@pytest.mark.parametrize(
    "text",
    ["https://u:p%40@h:1/a%2Fb/\u00e9?q=1#fr%21ag", "https:/p", "//h//p", "/a:b/c", "https:op?q", "*"],
)
def test_a_url_written_back_reads_back_the_same(text: str) -> None:
    url = neturl.parse(text)
    again = neturl.parse(neturl.to_string(url))
    assert (again.scheme, again.host, neturl.escaped_path(again), again.raw_query) == (
        url.scheme,
        url.host,
        neturl.escaped_path(url),
        url.raw_query,
    )


def test_a_query_of_too_many_parameters_reads_as_none() -> None:
    assert neturl.query("&".join(["x"] * 10000)) == {"x": [""] * 10000}
    assert neturl.query("&".join(["x"] * 10001)) == {}
