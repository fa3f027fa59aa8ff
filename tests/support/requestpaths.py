"""Request paths and queries for the routing property tests (issue 20): served paths bent the ways
that made the router and the authorizer read a path differently."""

from __future__ import annotations

from hypothesis import strategies as st

KINDS = [("events.core.io", "events"), ("rbac.authorization.core.io", "rolebindings")]
ODD_SEGMENTS = ["", ".", "..", "%2e", "%2E%2e", "%2F", "x", "status", "watch", "proxy", "namespaces"]
QUERY_TERMS = [
    "watch",
    "watch=1",
    "watch=true",
    "watch=TRUE",
    "watch=0",
    "watch=false",
    "watch=False",
    "watch=",
    "fieldSelector=metadata.name%3Dx",
    "fieldSelector=metadata.name%3D%3Dx",
    "fieldSelector=metadata.name!%3Dx",
    "fieldSelector=metadata.name%3Dx,metadata.name%3Dy",
    "fieldSelector=metadata.name%3Da%5C,b",
    "fieldSelector=metadata.name%3D..",
    "fieldSelector=metadata.name%3Da%2Fb",
    "fieldSelector=metadata.namespace%3Dteam-b",
    "labelSelector=a%3Db",
    "timeoutSeconds=1",
]


def _encoded(segment: str) -> str:
    return "".join(f"%{ord(c):02X}" for c in segment)


@st.composite
def paths(draw: st.DrawFn) -> str:
    """A served path (a kind's collection or object, namespaced or not, under /watch/ or not),
    then bent: odd segments inserted, segments percent-encoded, upper-cased or joined by an encoded
    slash, and slashes added at the end."""
    group, plural = draw(st.sampled_from(KINDS))
    segments = ["apis", group, "v1"]
    segments += ["watch"] if draw(st.booleans()) else []
    namespace = draw(st.sampled_from(["team-a", "team-b", None]))
    segments += ["namespaces", namespace] if namespace else []
    segments.append(plural)
    segments += [draw(st.sampled_from(["x", "y", "..", "."]))] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(1, len(segments)))
        bend = draw(st.sampled_from(["insert", "encode", "upper", "join"]))
        if bend == "insert":
            segments.insert(at, draw(st.sampled_from(ODD_SEGMENTS)))
        elif at < len(segments) and bend == "encode":
            segments[at] = _encoded(segments[at])
        elif at < len(segments) and bend == "upper":
            segments[at] = segments[at].upper()
        elif at < len(segments) - 1:
            segments[at : at + 2] = [segments[at] + "%2F" + segments[at + 1]]
    return "/" + "/".join(segments) + draw(st.sampled_from(["", "/", "//"]))


# (method, path, query terms)
requests = st.tuples(
    st.sampled_from(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]),
    paths(),
    st.lists(st.sampled_from(QUERY_TERMS), max_size=4),
)
