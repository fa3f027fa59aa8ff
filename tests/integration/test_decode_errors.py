"""Writes whose body, or whose patched result, does not decode into the object, answered as
kube-apiserver answers them.

Each case of the table is a request kube-apiserver v1.33.13 was sent for the built-in twin
(rbac.authorization.k8s.io/v1 RoleBinding, events.k8s.io/v1 Event), with its answer: status,
reason, message (a 422 about a patch given as what it quotes and why, from which the message and
its one cause on the field `patch` follow), Warning headers. Group names are mapped to ours;
<NAME>, <UID>, <RV>, <CREATED> and <TIME> stand for the target object's name, uid,
resourceVersion, creationTimestamp and managedFields time, which differ from run to run.

What the table shows: a type error in a patch's result is 422 whatever fieldValidation says, the
patched JSON quoted as json-patch writes it (a merge or JSON patch) or the patch as Go prints a map
(a strategic merge patch, whose converter words its errors its own way); under Strict every unknown
and repeated field is one `strict decoding error`, a 400 for a create or update (a YAML body's
repeated keys first, as yaml.v2 reports them) and a 422 for a patch; under Warn each is a warning;
a server-side apply configuration with a repeated key is a 400 under Strict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.api import Api, ev_path, event, rb_path, rolebinding

NS = "fvk"
POST, PUT, PATCH = "POST", "PUT", "PATCH"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
JSON = "application/json"
YAML = "application/yaml"


@dataclass(frozen=True)
class Case:
    id: str
    method: str  # POST creates; PUT and PATCH act on an object created first
    content_type: str
    validation: str  # fieldValidation, or "" for the default (Warn)
    body: str  # NAME stands for the object's name
    status: int
    kind: str = "rb"
    reason: str = ""
    message: str = ""
    # A 422 about a patch: the value it quotes and why.
    quoted: str = ""
    detail: str = ""
    warnings: tuple[str, ...] = ()


RB_FULL = (
    '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
    '"metadata":{"name":"NAME","name":"NAME","foo":1},"spec":{"foo":1},'
    '"roleRef":{"apiGroup":"rbac.authorization.core.io","kind":"ClusterRole","name":"view","bar":2},'
    '"subjects":[{"kind":"User","name":"a","name":"b","zzz":1}],"spec":2}'
)
RB_FREE = (
    '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
    '"metadata":{"name":"NAME","managedFields":[{"manager":"m","operation":"Update","apiVersion":"v1",'
    '"fieldsType":"FieldsV1","fieldsV1":{"f:a":{},"f:a":{}}}]},"spec":{"foo":1,"foo":2},'
    '"roleRef":{"apiGroup":"rbac.authorization.core.io","kind":"ClusterRole","name":"view"}}'
)
EV_UNKNOWN = (
    '{"apiVersion":"events.core.io/v1","kind":"Event","metadata":{"name":"NAME"},'
    '"eventTime":"2026-11-22T02:16:41.123456Z","action":"Started","reason":"Started",'
    '"type":"Normal","reportingController":"example.com/c","reportingInstance":"c-1",'
    '"series":{"count":2,"lastObservedTime":"2026-11-22T02:16:41.123456Z","bogus":1},'
    '"regarding":{"kind":"Pod","name":"web-0","uid":"u","uid":"u"}}'
)
YAML_BODY = (
    "zz: 1\nspec:\n  b: 1\n  b: 2\nroleRef:\n  apiGroup: rbac.authorization.core.io\n  kind: ClusterRole\n"
    "  name: view\napiVersion: rbac.authorization.core.io/v1\nkind: RoleBinding\nroleRef:\n"
    "  apiGroup: rbac.authorization.core.io\n  kind: ClusterRole\n  name: view\nmetadata:\n"
    '  name: NAME\n  foo: 1\n  labels: {a: "1", a: "2"}\n'
)
APPLY_BODY = (
    "apiVersion: rbac.authorization.core.io/v1\nkind: RoleBinding\nmetadata:\n  name: NAME\n"
    '  labels:\n    a: "1"\n    a: "2"\nroleRef:\n  apiGroup: rbac.authorization.core.io\n'
    "  kind: ClusterRole\n  name: view\nroleRef:\n  apiGroup: rbac.authorization.core.io\n"
    "  kind: ClusterRole\n  name: view\n"
)
APPLY_JSON = (
    '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
    '"metadata":{"name":"NAME","name":"NAME"},'
    '"roleRef":{"apiGroup":"rbac.authorization.core.io","kind":"ClusterRole","name":"view"}}'
)

RB_META = (
    '"metadata":{"name":"<NAME>","namespace":"fvk","uid":"<UID>","resourceVersion":"<RV>",'
    '"creationTimestamp":"<CREATED>","managedFields":[{"manager":"unknown","operation":"Update",'
    '"apiVersion":"rbac.authorization.core.io/v1","time":"<TIME>","fieldsType":"FieldsV1",'
    '"fieldsV1":{"f:roleRef":{},"f:subjects":{}}}]}'
)
EV_META = (
    '"metadata":{"name":"<NAME>","namespace":"fvk","uid":"<UID>","resourceVersion":"<RV>",'
    '"creationTimestamp":"<CREATED>","managedFields":[{"manager":"unknown","operation":"Update",'
    '"apiVersion":"events.core.io/v1","time":"<TIME>","fieldsType":"FieldsV1",'
    '"fieldsV1":{"f:action":{},"f:eventTime":{},"f:note":{},"f:reason":{},"f:regarding":{},'
    '"f:reportingController":{},"f:reportingInstance":{},"f:type":{}}}]}'
)
# The Event patched with `series.count: "x"`, as json-patch writes it back (merge and JSON patch).
EV_SERIES_COUNT_X = (
    '{"action":"Started","apiVersion":"events.core.io/v1",'
    + '"deprecatedFirstTimestamp":null,"deprecatedLastTimestamp":null,'
    + '"deprecatedSource":{},"eventTime":"2026-11-22T02:16:41.123456Z","kind":"Event",'
    + EV_META
    + ',"note":"container started","reason":"Started","regarding":{"kind":"Pod",'
    + '"namespace":"fvk","name":"web-0","apiVersion":"v1"},'
    + '"reportingController":"example.com/controller","reportingInstance":"controller-1",'
    + '"series":{"count":"x"},"type":"Normal"}'
)
ROLE_REF = '"roleRef":{"apiGroup":"rbac.authorization.core.io","kind":"ClusterRole","name":"view"}'
SUBJECTS = '"subjects":[{"kind":"User","apiGroup":"rbac.authorization.core.io","name":"alice"}]'

CASES = [
    Case(
        "merge-type",
        PATCH,
        MERGE,
        "Strict",
        '{"roleRef":{"name":5}}',
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
            + RB_META
            + ',"roleRef":{"apiGroup":"rbac.authorization.core.io","kind":"ClusterRole","name":5},'
            + SUBJECTS
            + "}"
        ),
        detail=("json: cannot unmarshal number into Go struct field RoleRef.roleRef.name of type string"),
    ),
    Case(
        "strategic-type",
        PATCH,
        STRATEGIC,
        "Strict",
        '{"roleRef":{"name":5}}',
        422,
        reason="Invalid",
        quoted="map[roleRef:map[name:5]]",
        detail="cannot convert int64 to string",
    ),
    Case(
        "json-type",
        PATCH,
        JSON_PATCH,
        "Strict",
        '[{"op":"replace","path":"/roleRef/name","value":5}]',
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
            + RB_META
            + ',"roleRef":{"apiGroup":"rbac.authorization.core.io","kind":"ClusterRole","name":5},'
            + SUBJECTS
            + "}"
        ),
        detail=("json: cannot unmarshal number into Go struct field RoleRef.roleRef.name of type string"),
    ),
    Case(
        "merge-list",
        PATCH,
        MERGE,
        "Ignore",
        '{"subjects":"x"}',
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
            + RB_META
            + ","
            + ROLE_REF
            + ',"subjects":"x"}'
        ),
        detail=(
            "json: cannot unmarshal string into Go struct field RoleBinding.subjects of type []v1.Subject"
        ),
    ),
    Case(
        "strategic-list",
        PATCH,
        STRATEGIC,
        "Ignore",
        '{"subjects":"x"}',
        422,
        reason="Invalid",
        quoted="map[subjects:x]",
        detail="cannot restore slice from string",
    ),
    Case(
        "json-list",
        PATCH,
        JSON_PATCH,
        "Warn",
        '[{"op":"replace","path":"/subjects","value":"x"}]',
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
            + RB_META
            + ","
            + ROLE_REF
            + ',"subjects":"x"}'
        ),
        detail=(
            "json: cannot unmarshal string into Go struct field RoleBinding.subjects of type []v1.Subject"
        ),
    ),
    Case(
        "merge-first-in-text",
        PATCH,
        MERGE,
        "Strict",
        '{"subjects":"x","roleRef":{"name":5}}',
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
            + RB_META
            + ',"roleRef":{"apiGroup":"rbac.authorization.core.io","kind":"ClusterRole","name":5},'
            + '"subjects":"x"}'
        ),
        detail=("json: cannot unmarshal number into Go struct field RoleRef.roleRef.name of type string"),
    ),
    Case(
        "strategic-first-in-struct",
        PATCH,
        STRATEGIC,
        "Strict",
        '{"subjects":"x","roleRef":{"name":5}}',
        422,
        reason="Invalid",
        quoted="map[roleRef:map[name:5] subjects:x]",
        detail="cannot restore slice from string",
    ),
    Case(
        "strategic-uid",
        PATCH,
        STRATEGIC,
        "Strict",
        '{"metadata":{"uid":5,"labels":{"a":true}}}',
        422,
        reason="Invalid",
        quoted="map[metadata:map[labels:map[a:true] uid:5]]",
        detail="cannot convert int64 to types.UID",
    ),
    Case(
        "merge-uid",
        PATCH,
        MERGE,
        "Strict",
        '{"metadata":{"uid":5}}',
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
            + '"metadata":{"creationTimestamp":"<CREATED>","managedFields":[{"manager":"unknown",'
            + '"operation":"Update","apiVersion":"rbac.authorization.core.io/v1","time":"<TIME>",'
            + '"fieldsType":"FieldsV1","fieldsV1":{"f:roleRef":{},"f:subjects":{}}}],'
            + '"name":"<NAME>","namespace":"fvk","resourceVersion":"<RV>","uid":5},'
            + ROLE_REF
            + ","
            + SUBJECTS
            + "}"
        ),
        detail=(
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.uid of type types.UID"
        ),
    ),
    Case(
        "strategic-whole-float",
        PATCH,
        STRATEGIC,
        "Strict",
        '{"metadata":{"generation":2.0,"labels":{"a":"b"}}}',
        200,
    ),
    Case(
        "merge-unknown",
        PATCH,
        MERGE,
        "Strict",
        '{"spec":{"x":1},"roleRef":{"foo":1}}',
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
            + RB_META
            + ',"roleRef":{"apiGroup":"rbac.authorization.core.io","foo":1,"kind":"ClusterRole",'
            + '"name":"view"},"spec":{"x":1},'
            + SUBJECTS
            + "}"
        ),
        detail=('strict decoding error: unknown field "roleRef.foo", unknown field "spec"'),
    ),
    Case(
        "strategic-unknown",
        PATCH,
        STRATEGIC,
        "Strict",
        (
            '{"zz":1,"metadata":{"qq":1,"labels":{"a":"b"}},"aa":{"x":1},'
            '"subjects":[{"kind":"User","name":"a","oo":1}]}'
        ),
        422,
        reason="Invalid",
        quoted=(
            "map[aa:map[x:1] metadata:map[labels:map[a:b] qq:1] subjects:[map[kind:User name:a oo:1]] zz:1]"
        ),
        detail=(
            'strict decoding error: unknown field "aa", unknown field "metadata.qq", unknown '
            'field "subjects[0].oo", unknown field "zz"'
        ),
    ),
    Case(
        "json-unknown",
        PATCH,
        JSON_PATCH,
        "Strict",
        (
            '[{"op":"add","path":"/spec","value":{"b":1,"a":2},"extra":1,"Op":2},{"op":"add",'
            '"path":"/roleRef/foo","value":1}]'
        ),
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
            + RB_META
            + ',"roleRef":{"apiGroup":"rbac.authorization.core.io","foo":1,"kind":"ClusterRole",'
            + '"name":"view"},"spec":{"b":1,"a":2},'
            + SUBJECTS
            + "}"
        ),
        detail=(
            'strict decoding error: json patch unknown field "[0].extra", json patch unknown '
            'field "[0].Op", unknown field "roleRef.foo", unknown field "spec"'
        ),
    ),
    Case(
        "merge-duplicates",
        PATCH,
        MERGE,
        "Strict",
        '{"a":1,"a":2,"b":{"x":1,"x":2},"b":{"y":1}}',
        422,
        reason="Invalid",
        quoted=(
            '{"a":2,"apiVersion":"rbac.authorization.core.io/v1","b":{"y":1},'
            + '"kind":"RoleBinding",'
            + RB_META
            + ","
            + ROLE_REF
            + ","
            + SUBJECTS
            + "}"
        ),
        detail=(
            'strict decoding error: duplicate field "a", duplicate field "b.x", duplicate field '
            '"b", unknown field "a", unknown field "b"'
        ),
    ),
    Case(
        "strategic-duplicates",
        PATCH,
        STRATEGIC,
        "Strict",
        '{"zz":1,"zz":2,"metadata":{"labels":{"a":"1","a":"2"}}}',
        422,
        reason="Invalid",
        quoted="map[metadata:map[labels:map[a:2]] zz:2]",
        detail=(
            'strict decoding error: duplicate field "zz", duplicate field "metadata.labels.a", '
            'unknown field "zz"'
        ),
    ),
    Case(
        "json-duplicates",
        PATCH,
        JSON_PATCH,
        "Strict",
        (
            '[{"op":"add","op":"add","path":"/metadata/labels","value":{"b":"1","a":"2",'
            '"a":"3"}},{"op":"add","path":"/spec","value":1}]'
        ),
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
            + '"metadata":{"creationTimestamp":"<CREATED>","labels":{"b":"1","a":"2","a":"3"},'
            + '"managedFields":[{"manager":"unknown","operation":"Update",'
            + '"apiVersion":"rbac.authorization.core.io/v1","time":"<TIME>",'
            + '"fieldsType":"FieldsV1","fieldsV1":{"f:roleRef":{},"f:subjects":{}}}],'
            + '"name":"<NAME>","namespace":"fvk","resourceVersion":"<RV>","uid":"<UID>"},'
            + ROLE_REF
            + ',"spec":1,'
            + SUBJECTS
            + "}"
        ),
        detail=(
            'strict decoding error: json patch duplicate field "[0].op", json patch duplicate '
            'field "[0].value.a", duplicate field "metadata.labels.a", unknown field "spec"'
        ),
    ),
    Case(
        "json-duplicates-decoded",
        PATCH,
        JSON_PATCH,
        "Strict",
        (
            '[{"op":"add","path":"/metadata/labels","value":{"a":"1","a":"2"}},{"op":"add",'
            '"path":"/metadata/labels/b","value":"3"},{"op":"add","path":"/spec","value":1}]'
        ),
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
            + '"metadata":{"creationTimestamp":"<CREATED>","labels":{"a":"2","b":"3"},'
            + '"managedFields":[{"manager":"unknown","operation":"Update",'
            + '"apiVersion":"rbac.authorization.core.io/v1","time":"<TIME>",'
            + '"fieldsType":"FieldsV1","fieldsV1":{"f:roleRef":{},"f:subjects":{}}}],'
            + '"name":"<NAME>","namespace":"fvk","resourceVersion":"<RV>","uid":"<UID>"},'
            + ROLE_REF
            + ',"spec":1,'
            + SUBJECTS
            + "}"
        ),
        detail=('strict decoding error: json patch duplicate field "[0].value.a", unknown field "spec"'),
    ),
    Case(
        "merge-warn",
        PATCH,
        MERGE,
        "Warn",
        '{"a":1,"a":2,"b":{"x":1,"x":2},"roleRef":{"foo":1}}',
        200,
        warnings=(
            '299 - "duplicate field \\"a\\""',
            '299 - "duplicate field \\"b.x\\""',
            '299 - "unknown field \\"a\\""',
            '299 - "unknown field \\"b\\""',
            '299 - "unknown field \\"roleRef.foo\\""',
        ),
    ),
    Case(
        "strategic-warn",
        PATCH,
        STRATEGIC,
        "Warn",
        '{"zz":1,"zz":2,"metadata":{"labels":{"a":"1","a":"2"}}}',
        200,
        warnings=(
            '299 - "duplicate field \\"zz\\""',
            '299 - "duplicate field \\"metadata.labels.a\\""',
            '299 - "unknown field \\"zz\\""',
        ),
    ),
    Case(
        "json-warn",
        PATCH,
        JSON_PATCH,
        "Warn",
        (
            '[{"op":"add","path":"/metadata/labels","value":{"a":"1","a":"2"}},{"op":"add",'
            '"path":"/spec","value":1,"x":1}]'
        ),
        200,
        warnings=(
            '299 - "json patch duplicate field \\"[0].value.a\\""',
            '299 - "json patch unknown field \\"[1].x\\""',
            '299 - "duplicate field \\"metadata.labels.a\\""',
            '299 - "unknown field \\"spec\\""',
        ),
    ),
    Case(
        "merge-ignore",
        PATCH,
        MERGE,
        "Ignore",
        '{"a":1,"a":2,"roleRef":{"foo":1}}',
        200,
    ),
    Case(
        "json-order",
        PATCH,
        JSON_PATCH,
        "Strict",
        (
            '[{"op":"add","path":"/zz","value":{"b":{"d":1,"c":2},"a":1}},{"op":"move",'
            '"from":"/zz/b","path":"/yy"},{"op":"copy","from":"/roleRef","path":"/xx"},'
            '{"op":"add","path":"/subjects/0/q","value":1},{"op":"test","path":"/yy",'
            '"value":{"c":2,"d":1}},{"op":"add","path":"/ww","value":[1,null,{"b":null,'
            '"a":"<&>"}]}]'
        ),
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
            + RB_META
            + ","
            + ROLE_REF
            + ',"subjects":[{"apiGroup":"rbac.authorization.core.io","kind":"User","name":"alice",'
            + '"q":1}],"ww":[1,null,{"b":null,"a":"\\u003c\\u0026\\u003e"}],'
            + '"xx":{"apiGroup":"rbac.authorization.core.io","kind":"ClusterRole","name":"view"},'
            + '"yy":{"c":2,"d":1},"zz":{"a":1}}'
        ),
        detail=(
            'strict decoding error: unknown field "subjects[0].q", unknown field "ww", unknown '
            'field "xx", unknown field "yy", unknown field "zz"'
        ),
    ),
    Case(
        "merge-order",
        PATCH,
        MERGE,
        "Strict",
        (
            '{"zz":[1,null,{"b":null,"a":2}],"subjects":{"b":1,"a":{"d":null,"c":1}},'
            '"roleRef":[{"b":1,"a":null}]}'
        ),
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
            + RB_META
            + ',"roleRef":[{"b":1,"a":null}],"subjects":{"a":{"c":1},"b":1},"zz":[1,null,{"a":2}]}'
        ),
        detail=("json: cannot unmarshal array into Go struct field RoleBinding.roleRef of type v1.RoleRef"),
    ),
    Case(
        "merge-kind",
        PATCH,
        MERGE,
        "Strict",
        '{"kind":"Foo"}',
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":"Foo",'
            + RB_META
            + ","
            + ROLE_REF
            + ","
            + SUBJECTS
            + "}"
        ),
        detail=(
            'no kind "Foo" is registered for version "rbac.authorization.core.io/v1" in scheme '
            '"pkg/runtime/scheme.go:110"'
        ),
    ),
    Case(
        "json-api-version",
        PATCH,
        JSON_PATCH,
        "Strict",
        '[{"op":"replace","path":"/apiVersion","value":"v9"}]',
        422,
        reason="Invalid",
        quoted=('{"apiVersion":"v9","kind":"RoleBinding",' + RB_META + "," + ROLE_REF + "," + SUBJECTS + "}"),
        detail=('no kind "RoleBinding" is registered for version "v9" in scheme "pkg/runtime/scheme.go:110"'),
    ),
    Case(
        "merge-kind-type",
        PATCH,
        MERGE,
        "Strict",
        '{"kind":5}',
        422,
        reason="Invalid",
        quoted=(
            '{"apiVersion":"rbac.authorization.core.io/v1","kind":5,'
            + RB_META
            + ","
            + ROLE_REF
            + ","
            + SUBJECTS
            + "}"
        ),
        detail=(
            "couldn't get version/kind; json parse error: json: cannot unmarshal number into Go "
            "struct field .kind of type string"
        ),
    ),
    Case(
        "strategic-kind",
        PATCH,
        STRATEGIC,
        "Strict",
        '{"kind":"Foo","apiVersion":"v9"}',
        200,
    ),
    Case(
        "merge-not-an-object",
        PATCH,
        MERGE,
        "Ignore",
        '[1,null,{"b":2,"a":1},"<x>"]',
        422,
        reason="Invalid",
        quoted='[1,null,{"a":1,"b":2},"\\u003cx\\u003e"]',
        detail=(
            "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go "
            'value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind '
            'string "json:\\"kind,omitempty\\"" }'
        ),
    ),
    Case(
        "event-merge-type",
        PATCH,
        MERGE,
        "Strict",
        '{"series":{"count":"x"}}',
        422,
        kind="ev",
        reason="Invalid",
        quoted=EV_SERIES_COUNT_X,
        detail=("json: cannot unmarshal string into Go struct field EventSeries.series.count of type int32"),
    ),
    Case(
        "event-strategic-type",
        PATCH,
        STRATEGIC,
        "Strict",
        '{"series":{"count":"x"}}',
        422,
        kind="ev",
        reason="Invalid",
        quoted="map[series:map[count:x]]",
        detail="unrecognized type: int32",
    ),
    Case(
        "event-json-type",
        PATCH,
        JSON_PATCH,
        "Ignore",
        '[{"op":"add","path":"/series","value":{"count":"x"}}]',
        422,
        kind="ev",
        reason="Invalid",
        quoted=EV_SERIES_COUNT_X,
        detail=("json: cannot unmarshal string into Go struct field EventSeries.series.count of type int32"),
    ),
    Case(
        "event-strategic-struct",
        PATCH,
        STRATEGIC,
        "Strict",
        '{"series":"x","regarding":{"uid":5}}',
        422,
        kind="ev",
        reason="Invalid",
        quoted="map[regarding:map[uid:5] series:x]",
        detail="cannot restore struct from: string",
    ),
    Case(
        "event-strategic-int32",
        PATCH,
        STRATEGIC,
        "Strict",
        '{"deprecatedCount":2.5}',
        422,
        kind="ev",
        reason="Invalid",
        quoted="map[deprecatedCount:2.5]",
        detail="cannot convert float64 to int32",
    ),
    Case(
        "event-merge-unknown",
        PATCH,
        MERGE,
        "Strict",
        (
            '{"zzz":1,"series":{"count":2,"lastObservedTime":"2026-11-22T02:16:41.000000Z",'
            '"q":1},"aaa":1,"regarding":{"foo":1}}'
        ),
        422,
        kind="ev",
        reason="Invalid",
        quoted=(
            '{"aaa":1,"action":"Started","apiVersion":"events.core.io/v1",'
            + '"deprecatedFirstTimestamp":null,"deprecatedLastTimestamp":null,'
            + '"deprecatedSource":{},"eventTime":"2026-11-22T02:16:41.123456Z","kind":"Event",'
            + EV_META
            + ',"note":"container started","reason":"Started","regarding":{"apiVersion":"v1",'
            + '"foo":1,"kind":"Pod","name":"web-0","namespace":"fvk"},'
            + '"reportingController":"example.com/controller","reportingInstance":"controller-1",'
            + '"series":{"count":2,"lastObservedTime":"2026-11-22T02:16:41.000000Z","q":1},'
            + '"type":"Normal","zzz":1}'
        ),
        detail=(
            'strict decoding error: unknown field "aaa", unknown field "regarding.foo", unknown '
            'field "series.q", unknown field "zzz"'
        ),
    ),
    Case(
        "event-strategic-unknown",
        PATCH,
        STRATEGIC,
        "Strict",
        (
            '{"zzz":1,"series":{"count":2,"lastObservedTime":"2026-11-22T02:16:41.000000Z",'
            '"q":1},"aaa":1,"regarding":{"foo":1}}'
        ),
        422,
        kind="ev",
        reason="Invalid",
        quoted=(
            "map[aaa:1 regarding:map[foo:1] series:map[count:2 "
            "lastObservedTime:2026-11-22T02:16:41.000000Z q:1] zzz:1]"
        ),
        detail=(
            'strict decoding error: unknown field "aaa", unknown field "regarding.foo", unknown '
            'field "series.q", unknown field "zzz"'
        ),
    ),
    Case(
        "create-strict",
        POST,
        JSON,
        "Strict",
        RB_FULL,
        400,
        reason="BadRequest",
        message=(
            'RoleBinding in version "v1" cannot be handled as a RoleBinding: strict decoding '
            'error: duplicate field "metadata.name", unknown field "metadata.foo", unknown field '
            '"spec", unknown field "roleRef.bar", duplicate field "subjects[0].name", unknown '
            'field "subjects[0].zzz"'
        ),
    ),
    Case(
        "create-warn",
        POST,
        JSON,
        "Warn",
        RB_FULL,
        201,
        warnings=(
            '299 - "duplicate field \\"metadata.name\\""',
            '299 - "unknown field \\"metadata.foo\\""',
            '299 - "unknown field \\"spec\\""',
            '299 - "unknown field \\"roleRef.bar\\""',
            '299 - "duplicate field \\"subjects[0].name\\""',
            '299 - "unknown field \\"subjects[0].zzz\\""',
        ),
    ),
    Case(
        "create-ignore",
        POST,
        JSON,
        "Ignore",
        RB_FULL,
        201,
    ),
    Case(
        "create-free-form",
        POST,
        JSON,
        "Strict",
        RB_FREE,
        400,
        reason="BadRequest",
        message=(
            'RoleBinding in version "v1" cannot be handled as a RoleBinding: strict decoding '
            'error: unknown field "spec"'
        ),
    ),
    Case(
        "update-strict",
        PUT,
        JSON,
        "Strict",
        RB_FULL,
        400,
        reason="BadRequest",
        message=(
            'RoleBinding in version "v1" cannot be handled as a RoleBinding: strict decoding '
            'error: duplicate field "metadata.name", unknown field "metadata.foo", unknown field '
            '"spec", unknown field "roleRef.bar", duplicate field "subjects[0].name", unknown '
            'field "subjects[0].zzz"'
        ),
    ),
    Case(
        "update-warn",
        PUT,
        JSON,
        "",
        RB_FULL,
        200,
        warnings=(
            '299 - "duplicate field \\"metadata.name\\""',
            '299 - "unknown field \\"metadata.foo\\""',
            '299 - "unknown field \\"spec\\""',
            '299 - "unknown field \\"roleRef.bar\\""',
            '299 - "duplicate field \\"subjects[0].name\\""',
            '299 - "unknown field \\"subjects[0].zzz\\""',
        ),
    ),
    Case(
        "event-create-strict",
        POST,
        JSON,
        "Strict",
        EV_UNKNOWN,
        400,
        kind="ev",
        reason="BadRequest",
        message=(
            'Event in version "v1" cannot be handled as a Event: strict decoding error: unknown '
            'field "series.bogus", duplicate field "regarding.uid"'
        ),
    ),
    Case(
        "yaml-create-strict",
        POST,
        YAML,
        "Strict",
        YAML_BODY,
        400,
        reason="BadRequest",
        message=(
            'RoleBinding in version "v1" cannot be handled as a RoleBinding: strict decoding '
            'error: yaml: unmarshal errors:\n  line 4: key "b" already set in map\n  line 12: key '
            '"roleRef" already set in map\n  line 18: key "a" already set in map, unknown field '
            '"metadata.foo", unknown field "spec", unknown field "zz"'
        ),
    ),
    Case(
        "yaml-create-warn",
        POST,
        YAML,
        "Warn",
        YAML_BODY,
        201,
        warnings=(
            '299 - "line 4: key \\"b\\" already set in map"',
            '299 - "line 12: key \\"roleRef\\" already set in map"',
            '299 - "line 18: key \\"a\\" already set in map"',
            '299 - "unknown field \\"metadata.foo\\""',
            '299 - "unknown field \\"spec\\""',
            '299 - "unknown field \\"zz\\""',
        ),
    ),
    Case(
        "yaml-update-strict",
        PUT,
        YAML,
        "Strict",
        YAML_BODY,
        400,
        reason="BadRequest",
        message=(
            'RoleBinding in version "v1" cannot be handled as a RoleBinding: strict decoding '
            'error: yaml: unmarshal errors:\n  line 4: key "b" already set in map\n  line 12: key '
            '"roleRef" already set in map\n  line 18: key "a" already set in map, unknown field '
            '"metadata.foo", unknown field "spec", unknown field "zz"'
        ),
    ),
    Case(
        "apply-strict",
        PATCH,
        APPLY,
        "Strict",
        APPLY_BODY,
        400,
        reason="BadRequest",
        message=(
            "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n "
            ' line 7: key "a" already set in map\n  line 13: key "roleRef" already set in map'
        ),
    ),
    Case(
        "apply-warn",
        PATCH,
        APPLY,
        "",
        APPLY_BODY,
        200,
        warnings=(
            '299 - "line 7: key \\"a\\" already set in map"',
            '299 - "line 13: key \\"roleRef\\" already set in map"',
        ),
    ),
    Case(
        "apply-ignore",
        PATCH,
        APPLY,
        "Ignore",
        APPLY_BODY,
        200,
    ),
    Case(
        "apply-json-strict",
        PATCH,
        APPLY,
        "Strict",
        APPLY_JSON,
        400,
        reason="BadRequest",
        message=(
            "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n "
            ' line 1: key "name" already set in map'
        ),
    ),
]


def _volatile(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj["metadata"]
    return {
        "<UID>": meta["uid"],
        "<RV>": meta["resourceVersion"],
        "<CREATED>": meta["creationTimestamp"],
        "<TIME>": meta["managedFields"][0]["time"],
    }


def _fill(text: str, values: dict[str, str]) -> str:
    for token, value in values.items():
        text = text.replace(token, value)
    return text


def _expected_status(case: Case, values: dict[str, str]) -> dict[str, Any]:
    if not case.quoted:
        return {"reason": case.reason, "message": _fill(case.message, values), "details": None}
    # field.Invalid quotes the value with %q: JSON's quoting, for these values.
    cause = f"Invalid value: {json.dumps(_fill(case.quoted, values), ensure_ascii=False)}: {case.detail}"
    return {
        "reason": case.reason,
        "message": f' "" is invalid: patch: {cause}',
        "details": {"causes": [{"reason": "FieldValueInvalid", "message": cause, "field": "patch"}]},
    }


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_answers_as_kube_apiserver(api: Api, case: Case) -> None:
    collection = rb_path(NS) if case.kind == "rb" else ev_path(NS)
    values = {"<NAME>": case.id}
    if case.method != POST:
        made = api.post(collection, rolebinding(case.id) if case.kind == "rb" else event(case.id, NS))
        assert made.status == 201, made.body
        values.update(_volatile(made.json))
    query = [f"fieldValidation={case.validation}"] if case.validation else []
    if case.content_type == APPLY:
        query.append("fieldManager=tester")
    path = collection if case.method == POST else f"{collection}/{case.id}"
    response = api.request(
        case.method,
        path + ("?" + "&".join(query) if query else ""),
        raw=case.body.replace("NAME", case.id).encode(),
        content_type=case.content_type,
    )
    assert response.status == case.status, response.body
    assert response.header_values("Warning") == list(case.warnings)
    if case.status >= 400:
        answer = response.json
        assert {key: answer.get(key) for key in ("reason", "message", "details")} == _expected_status(
            case, values
        )
