"""Request paths and queries for the routing property tests (issue 20): served paths bent the ways
that made the router and the authorizer read a path differently."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

KINDS = [("events.core.io", "events"), ("rbac.authorization.core.io", "rolebindings")]
NAMESPACES = ["team-a", "team-b"]
# The empty segment three times: it is the one that moved the kind's name (issue 20).
ODD_SEGMENTS = ["", "", "", ".", "..", "%2e", "%2E%2e", "%2F", "status", "watch", "proxy", "namespaces"]
WATCH_TERMS = ["watch", "watch=1", "watch=true", "watch=TRUE", "watch=0", "watch=false", "watch=False"]
WATCH_TERMS += ["watch=", "watch=0&watch=1", "watch=1&watch=0"]
OTHER_TERMS = [
    "fieldSelector=metadata.name%3D..",
    "fieldSelector=metadata.name%3Da%2Fb",
    "fieldSelector=metadata.namespace%3Dteam-b",
    "labelSelector=a%3Db",
]
METHODS = ["GET", "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "DELETE"]


def _encoded(segment: str) -> str:
    return "".join(f"%{ord(c):02X}" for c in segment)


def _name_terms(names: Sequence[str]) -> list[str]:
    """Field selectors that pin, exclude or escape a name (`=`, `==`, `!=`, two names, a `\\,`)."""
    first, second = names[0], names[-1]
    return [
        f"fieldSelector=metadata.name%3D{first}",
        f"fieldSelector=metadata.name%3D%3D{first}",
        f"fieldSelector=metadata.name!%3D{first}",
        f"fieldSelector=metadata.name%3D{first},metadata.name%3D{second}",
        f"fieldSelector=metadata.name%3D{first}%5C,{second}",
    ]


@st.composite
def paths(draw: st.DrawFn, names: Sequence[str]) -> str:
    """A served path (a kind's collection or object, namespaced or not, under /watch/ or not),
    then bent: odd segments inserted, segments percent-encoded, upper-cased or joined by an encoded
    slash, and slashes added at the end."""
    group, plural = draw(st.sampled_from(KINDS))
    segments = ["apis", group, "v1"]
    segments += ["watch"] if draw(st.booleans()) else []
    namespace = draw(st.sampled_from([*NAMESPACES, None]))
    segments += ["namespaces", namespace] if namespace else []
    segments.append(plural)
    kind_at = len(segments) - 1
    segments += [draw(st.sampled_from([*names, "..", "."]))] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(0, 3))):
        # Around the kind's segment half the time: where a bent segment moves what names the kind.
        near = st.sampled_from([kind_at - 1, kind_at, kind_at + 1])
        at = min(draw(st.one_of(near, st.integers(1, len(segments)))), len(segments))
        bend = draw(st.sampled_from(["insert", "encode", "upper", "join"]))
        if bend == "insert":
            segments.insert(at, draw(st.sampled_from([*ODD_SEGMENTS, *names])))
        elif at < len(segments) and bend == "encode":
            segments[at] = _encoded(segments[at])
        elif at < len(segments) and bend == "upper":
            segments[at] = segments[at].upper()
        elif at < len(segments) - 1:
            segments[at : at + 2] = [segments[at] + "%2F" + segments[at + 1]]
    return "/" + "/".join(segments) + draw(st.sampled_from(["", "/", "//"]))


def requests(names: Sequence[str] = ("x", "y")) -> st.SearchStrategy[tuple[str, str, list[str]]]:
    """(method, path, query terms), the paths and selectors naming objects of `names`."""
    terms = st.lists(st.sampled_from(WATCH_TERMS + OTHER_TERMS + _name_terms(names)), max_size=4)
    return st.tuples(st.sampled_from(METHODS), paths(names), terms)
