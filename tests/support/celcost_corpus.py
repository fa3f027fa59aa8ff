"""The expressions and inputs coreio's CEL cost evaluator is held to upstream's answers over (see
tests/integration/test_cel_cost.py), and the comparison of a value with the oracle's JSON."""

from __future__ import annotations

import ast
import base64
import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

VARIABLES = ("object", "oldObject", "params", "request")

ROLE_BINDING: dict[str, Any] = {
    "kind": "RoleBinding",
    "apiVersion": "rbac.authorization.core.io/v1",
    "metadata": {
        "name": "readers",
        "namespace": "team",
        "labels": {"tier": "gold", "app": "web"},
        "annotations": {"a": "1"},
        "creationTimestamp": "2024-05-01T10:00:00Z",
        "generation": 3,
    },
    "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
    "subjects": [
        {"kind": "User", "name": "alice"},
        {"kind": "Group", "name": "devs"},
        {"kind": "ServiceAccount", "name": "bot", "namespace": "team"},
    ],
    "spec": {
        "replicas": 3,
        "ratio": 0.5,
        "items": [3, 1, 2],
        "words": ["b", "a", "c"],
        "empty": [],
        "flag": True,
        "nothing": None,
        "cpu": "500m",
        "ip": "10.0.0.1",
        "cidr": "10.0.0.0/8",
        "url": "https://example.com:8443/a/b?x=1",
        "ver": "1.2.3",
        "ts": "2024-05-01T10:00:00.123456789Z",
        "dur": "1h30m",
        "neg": -7,
        "text": "Hello, World",
        "uni": "héllo wörld",
    },
}

EVENT: dict[str, Any] = {
    "kind": "Event",
    "apiVersion": "events.core.io/v1",
    "metadata": {"name": "pod.17a", "namespace": "team", "creationTimestamp": "2024-05-01T10:00:00Z"},
    "eventTime": "2024-05-01T10:00:00.500000Z",
    "reportingController": "kubelet",
    "reportingInstance": "node-1",
    "action": "Pulling",
    "reason": "Pulling",
    "regarding": {"kind": "Pod", "name": "web-1", "namespace": "team", "uid": "u-1"},
    "note": "Pulling image " + "x" * 200,
    "type": "Normal",
    "series": {"count": 12, "lastObservedTime": "2024-05-01T10:05:00Z"},
}

REQUEST: dict[str, Any] = {
    "operation": "CREATE",
    "userInfo": {"username": "alice", "groups": ["devs", "system:authenticated"]},
}


def activation(obj: dict[str, Any]) -> dict[str, Any]:
    return {"object": obj, "oldObject": None, "params": None, "request": REQUEST}


def unit_test_expressions() -> list[str]:
    """Every expression in the tables of tests/unit/test_cel_*.py (the first string of each
    parametrized case), whether or not it compiles here."""
    found: list[str] = []
    for path in sorted((Path(__file__).parents[1] / "unit").glob("test_cel_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", "") == "parametrize"
                and len(node.args) > 1
            ):
                found.extend(_first_strings(node.args[1]))
    return list(dict.fromkeys(found))


def _first_strings(table: ast.expr) -> list[str]:
    if not isinstance(table, ast.List | ast.Tuple):
        return []
    strings = []
    for case in table.elts:
        first = case.elts[0] if isinstance(case, ast.Tuple) and case.elts else case
        if isinstance(first, ast.Constant) and isinstance(first.value, str) and "\n" not in first.value:
            strings.append(first.value)
    return strings


def same_value(mine: Any, answer: dict[str, Any]) -> bool:
    """Whether `mine` (as Program.evaluate returns it) is the value the oracle answered (JSON, or
    only Go's %v where the value has no JSON form)."""
    if "value" not in answer:
        return _same_repr(mine, answer.get("repr", ""))
    return _same_json(mine, answer["value"])


def _same_repr(mine: Any, text: str) -> bool:
    if isinstance(mine, float):
        return {"+Inf": float("inf"), "-Inf": float("-inf")}.get(text) == mine or (
            text == "NaN" and mine != mine
        )
    return hasattr(mine, "DESCRIPTOR")  # a library value, which has no JSON form upstream: cost only


def _same_json(mine: Any, theirs: Any) -> bool:
    if isinstance(mine, bool) or mine is None or isinstance(mine, str):
        return bool(mine == theirs)
    if isinstance(mine, int | float):
        return isinstance(theirs, int | float) and float(mine) == float(theirs)
    if isinstance(mine, bytes):
        return bool(base64.b64encode(mine).decode() == theirs)
    if isinstance(mine, datetime.datetime):
        return isinstance(theirs, str) and _timestamp_micros(theirs) == mine
    if isinstance(mine, datetime.timedelta):
        return isinstance(theirs, str) and _duration_micros(theirs) == mine
    if isinstance(mine, list):
        return isinstance(theirs, list) and len(mine) == len(theirs) and all(map(_same_json, mine, theirs))
    if isinstance(mine, dict):
        return (
            isinstance(theirs, dict)
            and mine.keys() == theirs.keys()
            and all(_same_json(v, theirs[k]) for k, v in mine.items())
        )
    return False


def _timestamp_micros(text: str) -> datetime.datetime:
    head, _, fraction = text.rstrip("Z").partition(".")
    moment = datetime.datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.UTC)
    return moment + datetime.timedelta(microseconds=int((fraction or "0").ljust(6, "0")[:6]))


def _duration_micros(text: str) -> datetime.timedelta:
    micros = Decimal(text.rstrip("s")) * 1_000_000
    return datetime.timedelta(microseconds=int(micros))


# Hand-written: every operator, macro, conversion, strings extension function, optional, timestamp
# and duration, and each Kubernetes library, over the inputs above.
EXPRESSIONS: tuple[str, ...] = (
    "object.metadata.name",
    "object.metadata.name == 'readers'",
    "object.metadata.name != 'readers'",
    "object.metadata.name < 'z'",
    "object.metadata.name <= object.metadata.namespace",
    "object.spec.replicas > 2",
    "object.spec.replicas >= 3.0",
    "object.spec.ratio < 1",
    "object.spec.replicas + 1",
    "object.spec.replicas - 10",
    "object.spec.replicas * 4",
    "object.spec.replicas / 2",
    "object.spec.replicas % 2",
    "-object.spec.replicas",
    "object.spec.ratio * 2.0",
    "object.spec.ratio / 0.0",
    "!object.spec.flag",
    "object.spec.flag && object.spec.replicas > 1",
    "object.spec.flag || object.spec.missing",
    "object.spec.missing || object.spec.flag",
    "object.spec.missing && false",
    "object.spec.missing && true",
    "object.spec.replicas > 1 ? 'many' : 'one'",
    "object.spec.replicas > 5 ? 'many' : object.metadata.name",
    "(object.spec.flag ? object.metadata : object.roleRef).name",
    "has(object.spec)",
    "has(object.spec.missing)",
    "has(object.metadata.labels.tier)",
    "has(object.spec.nothing)",
    "object.spec.nothing == null",
    "object.subjects.size()",
    "size(object.subjects)",
    "size(object.metadata.name)",
    "object.metadata.name.size()",
    "size(object.metadata.labels)",
    "object.subjects[0].name",
    "object.subjects[1]['kind']",
    "object.metadata.labels['tier']",
    "'tier' in object.metadata.labels",
    "'x' in object.metadata.labels",
    "'devs' in object.request",
    "'devs' in request.userInfo.groups",
    "request.userInfo.username in ['alice', 'bob']",
    "request.userInfo.username in ['carol']",
    "request.userInfo.username in []",
    "object.spec.replicas in [1, 2, 3]",
    "object.spec.replicas in [1.0, 3.0]",
    "object.spec.words == ['b', 'a', 'c']",
    "object.spec.items == object.spec.items",
    "object.metadata.labels == {'tier': 'gold', 'app': 'web'}",
    "object.subjects.all(s, s.kind != 'Group' || s.name != 'system:masters')",
    "object.subjects.exists(s, s.kind == 'Group')",
    "object.subjects.exists(s, s.kind == 'Nope')",
    "object.subjects.exists_one(s, s.kind == 'User')",
    "object.subjects.map(s, s.name)",
    "object.subjects.map(s, s.kind == 'User', s.name)",
    "object.subjects.filter(s, s.kind != 'User')",
    "object.subjects.filter(s, has(s.namespace)).map(s, s.namespace)",
    "object.metadata.labels.all(k, k.size() > 2)",
    "object.metadata.annotations.exists(k, object.metadata.annotations[k] == '1')",
    "object.metadata.labels.map(k, k + '=' + object.metadata.labels[k]).exists(s, s == 'x')",
    "object.spec.items.all(i, i > 0)",
    "object.spec.items.map(i, i * i)",
    "object.spec.items.filter(i, i % 2 == 1)",
    "object.spec.empty.all(i, i > 0)",
    "object.spec.empty.exists(i, i > 0)",
    "object.spec.empty.map(i, i)",
    "object.spec.items.all(i, object.spec.items.exists(j, j == i))",
    "object.spec.items + [4, 5]",
    "object.spec.items + object.spec.words",
    "[object.spec.replicas] + object.spec.items",
    "object.metadata.name + '-' + object.metadata.namespace",
    "object.metadata.name.startsWith('read')",
    "object.metadata.name.endsWith('ers')",
    "object.metadata.name.contains('ade')",
    "object.metadata.name.matches('^r.*s$')",
    "matches(object.metadata.name, 'r')",
    "object.spec.text.lowerAscii()",
    "object.spec.text.upperAscii()",
    "object.spec.text.split(', ')",
    "object.spec.text.split(', ', 1)",
    "object.spec.words.join(',')",
    "object.spec.words.join()",
    "object.spec.text.replace('l', 'L')",
    "object.spec.text.replace('l', 'L', 2)",
    "object.spec.text.substring(2)",
    "object.spec.text.substring(2, 5)",
    "object.spec.text.trim()",
    "object.spec.text.indexOf('o')",
    "object.spec.text.lastIndexOf('o')",
    "object.spec.text.indexOf('o', 5)",
    "object.spec.text.charAt(4)",
    "object.spec.uni.size()",
    "object.spec.uni.upperAscii()",
    "object.spec.uni.indexOf('w')",
    "object.spec.uni.reverse()",
    "strings.quote(object.spec.text)",
    "int(object.spec.ratio)",
    "int('42')",
    "int(object.spec.cpu)",
    "uint(object.spec.replicas)",
    "double(object.spec.replicas)",
    "string(object.spec.replicas)",
    "string(object.spec.ratio)",
    "string(object.spec.flag)",
    "bool('true')",
    "bytes(object.metadata.name)",
    "string(bytes(object.metadata.name))",
    "type(object.spec.replicas) == int",
    "type(object.spec.ratio) == double",
    "type(object.metadata) == map",
    "dyn(object.spec.replicas) == 3",
    "timestamp(object.metadata.creationTimestamp)",
    "timestamp(object.metadata.creationTimestamp).getFullYear()",
    "timestamp(object.metadata.creationTimestamp).getMonth()",
    "timestamp(object.metadata.creationTimestamp).getHours('America/New_York')",
    "timestamp(object.spec.ts) + duration('1h') > timestamp(object.metadata.creationTimestamp)",
    "timestamp(object.spec.ts) - timestamp(object.metadata.creationTimestamp)",
    "duration(object.spec.dur)",
    "duration(object.spec.dur).getMinutes()",
    "duration(object.spec.dur) + duration('30m') == duration('2h')",
    "timestamp('2024-01-01T00:00:00Z') < timestamp(object.metadata.creationTimestamp)",
    "object.?spec.replicas",
    "object.?spec.missing.orValue(0)",
    "object.?spec.replicas.orValue(0)",
    "object.spec.?missing.hasValue()",
    "object.spec.?replicas.hasValue()",
    "optional.of(1).value()",
    "optional.none().orValue(2)",
    "object.?metadata.?labels.?tier.orValue('none')",
    "object.metadata.labels[?'tier'].orValue('x')",
    "object.spec.items[?5].orValue(0)",
    "[?object.spec.?missing, 1]",
    "[?object.spec.?replicas, 1]",
    "{?'a': object.spec.?replicas}",
    "optional.ofNonZeroValue(object.spec.replicas).hasValue()",
    "object.spec.?replicas.optMap(r, r * 2).value()",
    "object.spec.?missing.optMap(r, r * 2).hasValue()",
    "object.spec.big + 1",
    "object.spec.neg / 2",
    "object.spec.neg % 3",
    "-9223372036854775808 / -1",
    "1u + 2u",
    "2u - 3u",
    "object.spec.replicas == 3u",
    "object.spec.replicas == 3.0",
    "3.0 == object.spec.replicas",
    "1.0 / object.spec.ratio",
    "object.spec.missing.x",
    "object.subjects[3]",
    "object.subjects[-1]",
    "object.metadata.name[0]",
    "object.subjects.all(s, s.namespace == 'team')",
    "object.subjects.exists(s, s.namespace == 'team')",
    "object.subjects.map(s, s.namespace)",
    "quantity(object.spec.cpu)",
    "quantity(object.spec.cpu).isGreaterThan(quantity('100m'))",
    "quantity(object.spec.cpu).compareTo(quantity('1'))",
    "quantity(object.spec.cpu).add(quantity('1')).asApproximateFloat()",
    "quantity(object.spec.cpu).sub(1).sign()",
    "quantity('2').asInteger()",
    "isQuantity(object.spec.cpu)",
    "isQuantity('bad')",
    "quantity(object.spec.cpu) == quantity('0.5')",
    "ip(object.spec.ip).family()",
    "ip(object.spec.ip).isLoopback()",
    "isIP(object.spec.ip)",
    "ip.isCanonical(object.spec.ip)",
    "cidr(object.spec.cidr).containsIP(object.spec.ip)",
    "cidr(object.spec.cidr).containsIP(ip(object.spec.ip))",
    "cidr(object.spec.cidr).containsCIDR('10.1.0.0/16')",
    "cidr(object.spec.cidr).containsCIDR(cidr('10.1.0.0/16'))",
    "cidr(object.spec.cidr).prefixLength()",
    "cidr(object.spec.cidr).ip().family()",
    "cidr(object.spec.cidr).masked().prefixLength()",
    "isCIDR(object.spec.cidr)",
    "ip(object.spec.ip) == ip('10.0.0.1')",
    "url(object.spec.url).getHost()",
    "url(object.spec.url).getHostname()",
    "url(object.spec.url).getPort()",
    "url(object.spec.url).getScheme()",
    "url(object.spec.url).getEscapedPath()",
    "url(object.spec.url).getQuery()",
    "isURL(object.spec.url)",
    "semver(object.spec.ver).major()",
    "semver(object.spec.ver).isLessThan(semver('2.0.0'))",
    "semver(object.spec.ver).compareTo(semver('1.2.3'))",
    "isSemver(object.spec.ver)",
    "object.spec.text.find('[a-z]+')",
    "object.spec.text.findAll('[a-z]+')",
    "object.spec.text.findAll('[a-z]+', 1)",
    "object.spec.items.isSorted()",
    "object.spec.words.isSorted()",
    "object.spec.items.sum()",
    "object.spec.items.min()",
    "object.spec.items.max()",
    "object.spec.words.max()",
    "[1.5, 2.5].sum()",
    "object.subjects.map(s, s.name).isSorted()",
    "object.spec.items.sum() + object.spec.words.size()",
    "(object.spec.replicas > 0 ? 'aaaaaaaaaaaaaaaaaaaa' : object.metadata.name) + object.metadata.name",
    "(object.spec.replicas > 0 ? object.metadata.name : 'x') < object.metadata.namespace",
    "object.metadata.name + object.metadata.namespace",
    "object.spec.text + object.spec.text + object.spec.text",
    "object.spec.text.contains(object.metadata.name)",
    "object.spec.text.matches(object.metadata.name)",
    "object.subjects.map(s, s.name).join(', ')",
    "object.subjects.map(s, s.kind + ':' + s.name)",
    "object.metadata.name in object.spec.words",
    "object.metadata.name in ['a', object.metadata.name]",
    "object.metadata.name in {'readers': 1}",
    "string(b'abc')",
    "bytes('abc') + bytes(object.metadata.name)",
    "b'abc' < b'abd'",
    "object.metadata.name.lowerAscii() == object.metadata.name",
    "object.spec.items[0] + object.spec.items[1] * object.spec.items[2]",
    "object.spec.items.exists(i, i == 2) && object.spec.words.all(w, w.size() == 1)",
    "object.spec.missing.all(x, x)",
    "object.spec.replicas.all(x, x)",
    "object.spec.items.all(x, x / 0 == 1)",
    "object.spec.items.exists(x, x / (x - 1) > 0)",
    "object.spec.items.exists(x, 1 / (x - 1) > 0)",
    "object.spec.items.map(x, 1 / (x - 1))",
    "[1, 2, 3].map(x, x + 1)",
    "{'a': 1, 'b': 2}",
    "{'a': 1, 'b': 2}['b']",
    "{'a': 1}.a",
    "[[1], [2]][1][0]",
    "[object.spec.items][0][1]",
    "object.spec.text.split(',').size()",
    "'a' + 'b'",
    "'abc'.size()",
    "size('héllo')",
    "'%s'.size()",
    "1 + 2 * 3 - 4",
    "1 == 1.0",
    "1u == 1",
    "[1, 2] == [1, 2.0]",
    "{'a': 1} == {'a': 1u}",
    "null == object.spec.nothing",
    "object.spec.nothing.x",
    "object.spec.flag == true",
    "object.spec.words[0] < object.spec.words[1]",
    "object.spec.replicas < object.spec.ratio",
    "object.spec.ratio <= object.spec.replicas",
    "timestamp(object.spec.ts).getMilliseconds()",
    "timestamp(object.spec.ts).getSeconds()",
    "timestamp(object.spec.ts).getDayOfWeek()",
    "timestamp(object.spec.ts).getDayOfYear()",
    "timestamp(object.spec.ts).getDate()",
    "int(timestamp(object.spec.ts))",
    "string(timestamp(object.spec.ts))",
    "string(duration(object.spec.dur))",
    "duration('1ms').getMilliseconds()",
    "timestamp(object.spec.ts) == timestamp(object.spec.ts)",
    "timestamp('2024-01-01T00:00:00Z') + duration('1s')",
    "object.subjects.all(s, s.namespace == 'team' || true)",
    "object.subjects.exists(s, s.namespace.startsWith('t'))",
    "object.subjects.all(s, s.namespace.startsWith('t'))",
    "object.subjects.exists_one(s, s.namespace == 'team')",
    "object.subjects.filter(s, s.namespace == 'team')",
    "object.spec.items.exists(i, i > 2 && object.spec.missing)",
    "object.spec.items.all(i, object.spec.missing || i > 0)",
    "object.spec.items.all(i, i > 0 && object.spec.missing)",
    "object.spec.items.exists(i, object.spec.missing)",
    "(object.spec.flag ? 'aaaaaaaaaaaaaaaaaaaaaaaaa' : object.metadata.name) + object.metadata.name",
    "(object.spec.flag ? object.metadata.name : 'aaaaaaaaaaaaaaaaaaaaaaaaa') < object.metadata.name",
    "object.spec.words.map(w, w + 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa').map(w, w + w)",
    "object.spec.words.map(w, w + 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa')[0] + object.metadata.name",
    "object.spec.text.split(',')[0] + object.spec.text",
    "object.spec.text.lowerAscii() + object.spec.text",
    "object.metadata.name.substring(1) < object.metadata.name",
    "string(object.spec.replicas) + object.metadata.name",
    "object.subjects.map(s, s.name)[0] + object.metadata.name",
    "[object.metadata.name, object.metadata.namespace].all(n, n.size() > 2)",
    "object.metadata.name in [object.metadata.name]",
    "object.spec.words.exists(w, w in ['a', 'b'])",
    "object.spec.words.exists(w, w in object.spec.words)",
    "{'k': object.metadata.name}.k + 'x'",
    "{'k': object.metadata.name}['k'] + object.metadata.name",
    "[object.spec.text][0] + object.spec.text",
    "object.spec.text + [object.spec.text][0]",
    "object.spec.replicas == object.spec.ratio",
    "object.spec.items == [3, 1, 2]",
    "object.spec.words == object.spec.items",
    "object.metadata.labels != object.metadata.annotations",
    "object.metadata == object.metadata",
    "object.subjects[0] == object.subjects[0]",
    "object.subjects.map(s, s.name) == ['alice', 'devs', 'bot']",
    "object.spec.items.map(i, [i, i]).map(l, l.size())",
    "object.spec.items.map(i, {'v': i}).map(m, m.v)",
    "object.spec.items.filter(i, i > 1).all(i, i > 1)",
    "object.spec.items.all(i, object.spec.words.exists(w, w.size() == i))",
    "object.spec.items.exists_one(i, object.spec.words.all(w, w != ''))",
    "size(object.spec.items.filter(i, i > 0)) == 3",
    "has(object.subjects[0].name)",
    "has(object.spec.items)",
    "object.spec.?items[0].orValue(9)",
    "object.spec.?nothing.hasValue()",
    "object.spec.?missing.or(optional.of(1)).value()",
    "optional.none().or(optional.of(object.spec.replicas)).value()",
    "object.spec.?flag.value() && true",
    "object.metadata.?labels['tier'].orValue('none')",
    "object.metadata.labels.?tier.orValue('none') + object.metadata.name",
    "object.spec.text.indexOf(object.metadata.name)",
    "object.spec.text.lastIndexOf('l')",
    "object.spec.words.isSorted() || object.spec.items.isSorted()",
    "object.spec.words.min() + object.spec.words.max()",
    "object.spec.text.replace(',', '') + object.spec.text",
    "object.spec.text.split(' ').join('-')",
    "object.spec.text.trim().size()",
    "object.spec.text.charAt(0) + object.spec.text.charAt(1)",
    "strings.quote(object.metadata.name) + object.metadata.name",
    "object.spec.text.matches('W' + 'o')",
    "object.spec.text.find('o' + 'r')",
    "bytes(object.metadata.name) == b'readers'",
    "bytes(object.metadata.name).size()",
    "string(bytes(object.metadata.name)) + 'x'",
    "double(object.spec.replicas) * object.spec.ratio",
    "int(object.spec.ratio * 10.0) / 2",
    "uint(object.spec.replicas) + 1u",
    "object.spec.neg < 0u",
    "object.spec.ratio > 0",
    "-object.spec.ratio",
    "object.spec.replicas * -1",
    "object.spec.replicas - 3 == 0",
    "object.spec.items[1.0]",
    "object.spec.items[1u]",
    "object.metadata['name']",
    "object.metadata[object.kind]",
    "object.spec.items[object.spec.items[1]]",
    "object.spec.words[size(object.spec.words) - 1]",
    "object.subjects.map(s, s.kind).filter(k, k.startsWith('U'))",
    "object.metadata.labels.filter(k, k.startsWith('t'))",
    "object.metadata.labels.exists_one(k, k == 'tier')",
    "object.metadata.labels.all(k, object.metadata.labels[k].size() > 2)",
    "timestamp(object.metadata.creationTimestamp) < timestamp(object.spec.ts)",
    "timestamp(object.spec.ts) - duration('1h')",
    "duration('1h') - duration('30m')",
    "duration('1h') < duration(object.spec.dur)",
    "timestamp(object.spec.ts).getMinutes()",
    "duration(object.spec.dur).getHours()",
    "duration(object.spec.dur).getSeconds()",
    "type(object.spec.items) == list",
    "type(object.spec.nothing) == null_type",
    "type(object.metadata.name) == string",
    "type(object.metadata.name) != int",
    "dyn(object.spec.items).size()",
    "object.spec.items.size() + object.spec.words.size() + object.metadata.labels.size()",
    "!(object.spec.replicas > 2)",
    "object.spec.replicas > 2 && object.spec.replicas < 4 && object.spec.flag",
    "object.spec.replicas < 2 || object.spec.replicas > 4 || !object.spec.flag",
    "object.spec.flag ? (object.spec.replicas > 1 ? 'a' : 'b') : 'c'",
    "(object.spec.flag ? object.subjects : object.spec.items)[0].name",
    "(object.spec.flag ? object.metadata : {}).?labels.orValue({}).size()",
    "object.spec.text.matches('[')",
    "object.spec.text.matches(object.kind + '[')",
    "object.spec.text.matches(object.kind + '(')",
    "object.spec.uni.matches('^h.llo')",
    "object.spec.uni.lowerAscii()",
    "'ÀBC'.lowerAscii()",
    "object.spec.replicas.startsWith('a')",
    "object.metadata.name.startsWith(object.spec.replicas)",
    "object.spec.text.contains('')",
    "''.contains(object.spec.text)",
    "matches(object.spec.text, 'W.r')",
    "object.spec.text.endsWith('')",
)
