"""The cost bound held to upstream: for every expression of the CEL unit tests and a corpus covering
every operator, macro, string function, conversion, optional and Kubernetes library, over
RoleBindings of 0 to 20,000 subjects and short and long strings, upstream's actual cost (cel-go's
tracker, through the oracle built from Go modules) is never above the bound, and the iterations
counted from the input's list lengths are never above the iteration bound. Prints how tight the
bound is (bound / actual) and asserts it for the common policy shapes.
"""

from __future__ import annotations

import ast
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from apiserver.cel.checked import Checked, checked_tree
from apiserver.cel.cost.bound import Bound, cost_bound
from apiserver.cel.cost.sizes import Extent, SizeSummary, UniformSummary
from apiserver.cel.environment import checker
from apiserver.cel.program import UNIFORM_MOST_BYTES
from tests.support.celcost_build import Oracle, ensure_oracle

VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject", "variables")
UNIT_TESTS = Path(__file__).parents[1] / "unit"

Counter = Callable[[dict[str, Any]], int]


def subjects(vars_: dict[str, Any]) -> list[Any]:
    found: list[Any] = vars_["object"]["subjects"]
    return found


def _binding(count: int, name_length: int = 12, labels: int = 3, every: int = 1) -> dict[str, Any]:
    """A RoleBinding of `count` subjects, one in `every` with a name `name_length` longer."""
    kinds = ("User", "Group", "ServiceAccount")
    return {
        "apiVersion": "rbac.authorization.core.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": "binding-" + "n" * name_length,
            "namespace": "team-a",
            "labels": {f"label-{i}": "v" * (i % 40) for i in range(labels)},
            "annotations": {"note": "é" * name_length},
        },
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "Role", "name": "reader"},
        "subjects": [
            {
                "kind": kinds[i % 3],
                "name": f"system:subject-{i}-" + "s" * (name_length if i % every == 0 else 3),
                "namespace": "team-a",
                "apiGroup": "rbac.authorization.core.io",
            }
            for i in range(count)
        ],
        "l": [4, 5, 2],
        "m": [1, "a"],
        "s": "x" * name_length,
    }


def _variables(binding: dict[str, Any]) -> dict[str, Any]:
    return {
        "object": binding,
        "oldObject": None,
        "request": {
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated", "devs"]},
        },
        "params": {
            "prefix": "system:",
            "allowed": ["User", "Group"],
            "limit": 100,
            "kinds": ["User", "Group", "ServiceAccount", "Other"],
        },
        "namespaceObject": {"metadata": {"name": "team-a", "labels": {"env": "prod"}}},
        "variables": {},
    }


INPUTS: dict[str, dict[str, Any]] = {
    "empty": _variables(_binding(0)),
    "three": _variables(_binding(3)),
    "three-long": _variables(_binding(3, name_length=5000, labels=200)),
    "thousand": _variables(_binding(1000)),
    "thousand-long": _variables(_binding(1000, name_length=300)),
    "thousand-skewed": _variables(_binding(1000, name_length=300, every=7)),
    "twenty-thousand": _variables(_binding(20000)),
}


def _n(vars_: dict[str, Any]) -> int:
    return len(subjects(vars_))


def _labels(vars_: dict[str, Any]) -> int:
    return len(vars_["object"]["metadata"]["labels"])


# Inputs whose lists mix short and long strings: the bound charges every element as the longest, so
# its tightness there is reported, not asserted.
SKEWED = ("thousand-skewed",)

# (expression, the iterations it runs at most, counted from the input; None: no comprehension).
# The common policy shapes, whose bound must stay close to upstream's cost.
COMMON: list[tuple[str, Counter | None]] = [
    ("object.subjects.all(s, s.kind != 'Group')", _n),
    ("object.subjects.all(s, s.name.startsWith('system:'))", _n),
    ("object.subjects.exists(s, s.kind == 'ServiceAccount' && s.namespace == 'kube-system')", _n),
    ("object.subjects.all(s, s.name.matches('^system:[a-z0-9-]+$'))", _n),
    ("object.subjects.all(s, !has(s.apiGroup) || s.apiGroup == 'rbac.authorization.core.io')", _n),
    ("has(object.roleRef) && object.roleRef.kind == 'Role'", None),
    ("object.metadata.name.startsWith('binding-')", None),
    ("object.roleRef.name != 'cluster-admin'", None),
    ("size(object.subjects) <= 100", None),
    ("object.subjects.all(s, s.kind in ['User', 'Group', 'ServiceAccount'])", _n),
    ("object.subjects.exists_one(s, s.name == 'system:subject-0-sss')", _n),
    ("object.subjects.filter(s, s.kind == 'User').size() < 10", _n),
    ("object.subjects.map(s, s.name).all(n, n.size() < 64)", lambda v: 2 * _n(v)),
    ("object.subjects.all(s, s.name.endsWith('s') || s.name.contains('sub'))", _n),
    ("object.subjects.all(s, params.kinds.exists(k, k == s.kind))", lambda v: _n(v) * 4),
    ("object.metadata.labels.all(k, k.startsWith('label-'))", _labels),
    ("request.userInfo.groups.exists(g, g == 'system:masters')", lambda v: 2),
    ("object.subjects.all(s, s.name.startsWith(params.prefix))", _n),
]

# Every other construct: operators, macros, strings, conversions, optionals, Kubernetes' libraries.
OTHERS: list[tuple[str, Counter | None]] = [
    ("1 + 2 * 3 - 4 / 2 % 3", None),
    ("-object.l[0] < 0", None),
    ("object.l[0] + object.l[1] > object.l[2]", None),
    ("1.5 * 2.0 >= 3.0 && 2u <= 3u", None),
    ("!(object.s == 'x') ? 'a' : 'b'", None),
    ("object.s + object.s", None),
    ("object.s + '-suffix'", None),
    ("object.metadata.name + '/' + object.metadata.namespace", None),
    ("object.subjects + object.subjects", None),
    ("(object.subjects + object.l).size()", None),
    ("object.l + [1, 2, 3]", None),
    ("object.metadata.name < object.metadata.namespace", None),
    ("object.metadata.name >= 'a' && object.metadata.name <= 'z'", None),
    ("b'abc' < b'abd'", None),
    ("object.subjects == object.subjects", None),
    ("object.metadata.labels == {'a': 'b'}", None),
    ("object.metadata == object.metadata", None),
    ("object.s != ''", None),
    ("'team-a' in object.metadata", None),
    ("'label-1' in object.metadata.labels", None),
    ("object.metadata.namespace in ['team-a', 'team-b']", None),
    ("object.metadata.namespace in [object.metadata.name, object.metadata.namespace]", None),
    ("4 in object.l", None),
    ("object.subjects[0] in object.subjects", None),
    ("size(object.metadata.name)", None),
    ("object.metadata.name.size() + size(object.subjects) + size(object.metadata.labels)", None),
    ("size(b'abc')", None),
    ("object.metadata.name.matches('^binding-n*$')", None),
    ("matches(object.metadata.name, 'b.*')", None),
    ("object.metadata.annotations.note.contains('éé')", None),
    ("object.metadata.name.endsWith('n')", None),
    ("object.metadata.name.lowerAscii().upperAscii() == 'X'", None),
    ("object.metadata.name.trim().size()", None),
    ("object.metadata.name.substring(2).substring(1, 3)", None),
    ("object.metadata.name.replace('n', 'nn')", None),
    ("object.metadata.name.replace('', '-').size()", None),
    ("object.metadata.name.split('-').size()", None),
    ("object.metadata.name.split('').join(',')", None),
    ("object.metadata.name.split('-', 2)", None),
    ("object.subjects.map(s, s.name).join(', ').size()", _n),
    ("['a', 'b'].join()", None),
    ("object.metadata.name.indexOf('n')", None),
    ("object.metadata.name.lastIndexOf('n', 3)", None),
    ("object.metadata.name.charAt(1)", None),
    ("'%s-%d'.format([object.metadata.name, 3])", None),
    ("strings.quote(object.metadata.name)", None),
    ("string(object.l[0]) + string(1.5) + string(true) + string(2u)", None),
    ("string(bytes(object.metadata.name)).size()", None),
    ("bytes(object.metadata.name).size()", None),
    ("string(object.metadata.name)", None),
    ("int('42') + int(object.l[0]) + int(2.5) + int(3u)", None),
    ("uint(object.l[0]) + uint('3')", None),
    ("double(object.l[0]) + double('2.5')", None),
    ("bool('true') && bool(object.l[0] == 4)", None),
    ("dyn(object.l).size()", None),
    ("type(object.l) == list && type(object.s) == string", None),
    ("timestamp('2024-01-01T00:00:00Z') + duration('1h') > timestamp('2024-01-01T00:30:00Z')", None),
    ("timestamp('2024-01-01T00:00:00Z').getFullYear() + timestamp('2024-03-01T10:00:00Z').getHours()", None),
    ("duration('90m').getMinutes()", None),
    ("string(timestamp('2024-01-01T00:00:00Z')).size()", None),
    ("object.?metadata.?labels.orValue({}).size()", None),
    ("object.?missing.orValue('d')", None),
    ("object.?metadata.name.hasValue()", None),
    ("object.?metadata.name.value().size()", None),
    ("optional.of(object.s).or(optional.none()).value()", None),
    ("optional.ofNonZeroValue(object.s).hasValue()", None),
    ("object.l[?0].orValue(0) + object.l[?10].orValue(0)", None),
    ("object.?metadata.optMap(m, m.name).orValue('')", None),
    ("object.?metadata.optFlatMap(m, m.?name).orValue('')", None),
    ("[?object.?missing, ?object.?s].size()", None),
    ("sets.contains(object.subjects.map(s, s.kind), ['User', 'Group'])", _n),
    ("sets.intersects(object.subjects, object.subjects)", None),
    ("sets.equivalent(object.l, [2, 4, 5])", None),
    ("object.subjects.all(i, s, i < 30000 && s.name != '')", _n),
    ("object.metadata.labels.exists(k, v, v.size() > 30)", _labels),
    ("object.subjects.transformList(i, s, s.name).all(n, n.size() > 2)", lambda v: 2 * _n(v)),
    ("object.subjects.transformMap(i, s, s.kind).all(k, k >= 0)", lambda v: 2 * _n(v)),
    ("object.metadata.labels.transformMapEntry(k, v, {v + k: k}).size()", _labels),
    ("object.subjects.map(s, s.name).indexOf('system:subject-3-sss')", _n),
    ("object.l.lastIndexOf(5)", None),
    ("format.dns1123Label().validate(object.metadata.name).hasValue()", None),
    ("format.uri().validate(object.s).orValue([]).all(m, m.size() > 0)", lambda v: 1),
    ("format.named('qualifiedName').value().validate(object.metadata.name).orValue([]).size()", None),
    ("{?'a': object.?missing, 'b': object.s}.size()", None),
    ("{'a': object.s, 'b': object.metadata.name}.a.size()", None),
    ("{'k': object.subjects}.k.all(s, s.kind != '')", _n),
    ("[object.subjects, object.subjects].all(l, l.all(s, s.kind != ''))", lambda v: 2 + 2 * _n(v)),
    ("object.subjects.all(s, object.subjects.exists(t, t.name == s.name))", lambda v: _n(v) + _n(v) ** 2),
    ("object.metadata.labels.exists(k, object.metadata.labels[k] == 'v')", _labels),
    (
        "object.metadata.labels.map(k, object.metadata.labels[k]).exists(v, v.size() > 3)",
        lambda v: 2 * _labels(v),
    ),
    ("object.subjects.map(s, s.kind == 'User', s.name.size()).all(n, n < 100)", lambda v: 2 * _n(v)),
    (
        "object.subjects.filter(s, s.name.startsWith('system:')).map(s, s.name).exists(n, n.endsWith('s'))",
        lambda v: 3 * _n(v),
    ),
    ("[1, 2, 3].map(x, x * 2).filter(x, x > 2).size()", lambda v: 6),
    ("[1, 2, 3].exists_one(x, x == 2)", lambda v: 3),
    ("{'a': 1, 'b': 2}.all(k, k.size() == 1)", lambda v: 2),
    ("object.subjects.all(s, has(s.namespace) ? s.namespace == 'team-a' : true)", _n),
    ("object.subjects.exists(s, s.name.split(':').size() > 5)", _n),
    ("object.subjects.all(s, s.name.lowerAscii().startsWith('system:'))", _n),
    ("object.subjects.all(s, (s.name + ':' + s.kind).size() > 0)", _n),
    ("object.subjects.all(s, s.name.indexOf('s') >= 0)", _n),
    ("object.subjects.all(s, s.name.find('[0-9]+') != '')", _n),
    ("object.subjects.all(s, s.name.findAll('[0-9]').size() >= 0)", _n),
    ("object.subjects.all(s, url('https://example.com/' + s.name).getHost() == 'example.com')", _n),
    ("object.subjects.map(s, s.name.size()).sum() > 0", _n),
    ("object.subjects.map(s, s.name).max().size() > 0", _n),
    ("object.subjects.map(s, s.name).min() != ''", _n),
    ("object.subjects.map(s, s.kind).isSorted()", _n),
    ("object.l.sum() + object.l.min() + object.l.max()", None),
    ("object.l.isSorted()", None),
    ("[1, 2, 3].sum()", None),
    ("['b', 'a'].max()", None),
    ("object.metadata.name.find('n+')", None),
    ("object.metadata.name.findAll('n', 3).size()", None),
    ("url('https://example.com:8443/a/b?x=1&y=2').getQuery()['x'][0]", None),
    ("url('https://' + object.metadata.name + '.io/p').getHostname().size()", None),
    ("url('https://example.com/a').getScheme() + url('https://example.com:80/a').getPort()", None),
    ("url('https://example.com/a%20b').getEscapedPath()", None),
    ("isURL(object.metadata.name)", None),
    ("quantity('1Gi').isGreaterThan(quantity('1000Mi'))", None),
    ("quantity('500m').add(quantity('1')).sub(1).asApproximateFloat()", None),
    ("quantity('1k').asInteger() + quantity('2').sub(quantity('1')).asInteger()", None),
    ("isQuantity(object.metadata.name)", None),
    ("quantity('1') == quantity('1000m')", None),
    ("quantity('1').compareTo(quantity('2')) < 0 && quantity('3').isInteger()", None),
    ("semver('1.2.3').major() + semver('1.2.3').minor() + semver('1.2.3').patch()", None),
    ("semver('1.2.3').isLessThan(semver('1.3.0')) && semver('1.2.3').compareTo(semver('1.2.3')) == 0", None),
    ("isSemver(object.metadata.name)", None),
    ("ip('10.0.0.1').family() == 4 && ip('::1').isLoopback()", None),
    ("isIP(object.metadata.name) || isCIDR(object.metadata.name)", None),
    ("ip.isCanonical('2001:db8::1')", None),
    ("ip('10.1.1.1').isGlobalUnicast() && !ip('0.0.0.0').isGlobalUnicast()", None),
    ("ip('169.254.1.1').isLinkLocalUnicast() || ip('224.0.0.5').isLinkLocalMulticast()", None),
    ("ip('0.0.0.0').isUnspecified()", None),
    ("cidr('10.0.0.0/8').containsIP('10.1.2.3') && cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))", None),
    ("cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')", None),
    ("cidr('10.0.0.0/8').containsCIDR(cidr('10.2.0.0/16'))", None),
    ("cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8') && cidr('10.1.2.3/8').ip() == ip('10.1.2.3')", None),
    ("cidr('2001:db8::/32').prefixLength()", None),
    ("ip('10.0.0.1') == ip('10.0.0.1') && cidr('::1/128') != cidr('::2/128')", None),
    ("request.operation == 'CREATE' && request.userInfo.username.startsWith('al')", None),
    ("oldObject == null || oldObject.metadata.name == object.metadata.name", None),
    ("namespaceObject.metadata.labels.env == 'prod'", None),
    ("params.allowed.exists(a, a == object.roleRef.kind)", lambda v: 2),
    ("object.subjects.exists(s, s.kind == 'User') ? object.subjects.size() : 0", _n),
    ("object.subjects[0].name", None),
    ("object.subjects[size(object.subjects) - 1].name.size()", None),
    ("object.metadata['labels']['label-1']", None),
    ("object.missing.field", None),
    ("object.subjects.all(s, s.missing == 'x')", _n),
    ("has(object.metadata.labels) && has(object.missing)", None),
    (
        "object.subjects.all(s, object.metadata.labels.exists(k, s.name.contains(k)))",
        lambda v: _n(v) * (1 + _labels(v)),
    ),
]


def _unit_expressions() -> Iterator[str]:
    """Every string of the CEL unit tests (the tables' expressions among them)."""
    for path in sorted(UNIT_TESTS.glob("test_cel_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip():
                yield node.value


def _compile(source: str) -> Checked | None:
    try:
        return checked_tree(checker(VARIABLES).compile(source))
    except RuntimeError:
        return None


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    running = Oracle(ensure_oracle().path)
    yield running
    running.close()


class Figures:
    """Soundness failures and tightness ratios, gathered for one report."""

    def __init__(self) -> None:
        self.unsound: list[str] = []
        self.ratios: dict[str, list[float]] = {}
        self.checked = 0

    def record(self, group: str, source: str, actual: int, bound: int, label: str) -> None:
        self.checked += 1
        if actual > bound:
            self.unsound.append(f"{source!r} over {label}: upstream {actual} > bound {bound}")
        elif actual >= 20:
            self.ratios.setdefault(group, []).append(bound / actual)


def _measure(oracle: Oracle, figures: Figures, group: str, source: str, inputs: dict[str, Any]) -> list[str]:
    checked = _compile(source)
    if checked is None:
        return []
    worst: list[str] = []
    for label, variables in inputs.items():
        answer = oracle.ask(source, variables)
        if answer.get("compile") or answer.get("cost") is None:
            return []
        bound = cost_bound(checked, SizeSummary.of(variables))
        skewed = label in SKEWED
        figures.record(f"{group}, skewed" if skewed else group, source, answer["cost"], bound.cost, label)
        uniform = _uniform_bound(checked, variables)
        if uniform is not None:
            figures.record(f"{group}, by size class", source, answer["cost"], uniform.cost, label)
        if answer["cost"] >= 20 and bound.cost > 3 * answer["cost"] and not skewed:
            worst.append(f"{source!r} over {label}: bound {bound.cost} / upstream {answer['cost']}")
    return worst


def test_the_bound_is_never_below_upstreams_cost(oracle: Oracle) -> None:
    figures = Figures()
    loose_common: list[str] = []
    for source, _ in COMMON:
        loose_common += _measure(oracle, figures, "common", source, INPUTS)
    for source, _ in OTHERS:
        _measure(oracle, figures, "others", source, INPUTS)
    small = {label: INPUTS[label] for label in ("three", "thousand-long")}
    unit = sorted(set(_unit_expressions()))
    for source in unit:
        _measure(oracle, figures, "unit", source, small)
    print(
        f"\n{figures.checked} evaluations checked ({len(COMMON) + len(OTHERS)} own expressions, "
        f"{len(unit)} strings of the unit tests)"
    )
    for group, ratios in figures.ratios.items():
        print(
            f"bound / upstream, {group}: median {statistics.median(ratios):.2f}, max {max(ratios):.2f} "
            f"over {len(ratios)} evaluations costing 20 or more"
        )
    assert not figures.unsound, "\n".join(figures.unsound)
    assert not loose_common, "\n".join(loose_common)


@pytest.mark.parametrize(("source", "count"), [case for case in COMMON + OTHERS if case[1] is not None])
def test_the_iteration_bound_covers_the_iterations(source: str, count: Counter) -> None:
    checked = _compile(source)
    assert checked is not None, source
    for label, variables in INPUTS.items():
        bound = cost_bound(checked, SizeSummary.of(variables))
        assert bound.iterations >= count(variables), (label, bound)
        uniform = _uniform_bound(checked, variables)
        assert uniform is None or uniform.iterations >= count(variables), (label, uniform)


def _uniform_bound(checked: Checked, variables: dict[str, Any]) -> Bound | None:
    """The bound Program.run uses for small activations: over the activation's size class."""
    extent = Extent.of(variables, UNIFORM_MOST_BYTES)
    if extent is None:
        return None
    return cost_bound(checked, UniformSummary(extent.bucket, frozenset(variables)))
