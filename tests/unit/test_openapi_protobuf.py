"""/openapi/v2 in gnostic's protobuf: the messages, the mapping from the JSON document and the YAML
gnostic embeds, each held to what the Go code kube-apiserver runs produces (expected values and
data/swagger_rich.textproto were made with gnostic's compiler.Marshal and kube-openapi's
handler.ToProtoBinary). tests/e2e/test_openapi_protobuf.py checks kube-apiserver's own document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FIELD

from apiserver.openapi import build_documents, goyaml
from apiserver.openapi.gnostic import encode_document
from apiserver.openapi.openapiv2 import compile_declarations, message_class
from apiserver.resources import KINDS

DATA = Path(__file__).parent / "data"


def document(body: bytes) -> Any:
    message = message_class("Document")()
    message.ParseFromString(body)
    return message


# (JSON value, what yaml.v3 writes for it)
YAML_CASES: list[tuple[Any, str]] = [
    ("atomic", "atomic\n"),
    ("", '""\n'),
    # Plain unless it would read back as another type; YAML 1.1 booleans are strings to yaml.v3.
    ("true", '"true"\n'),
    ("yes", "yes\n"),
    ("null", '"null"\n'),
    ("1", '"1"\n'),
    ("1.5", '"1.5"\n'),
    ("0x1F", '"0x1F"\n'),
    ("08", '"08"\n'),
    ("1e400", "1e400\n"),  # a float Go cannot hold: a string
    (".5", '".5"\n'),
    ("2024-01-02", '"2024-01-02"\n'),
    ("2024-02-30", "2024-02-30\n"),  # no such day: a string
    ("<<", "<<\n"),
    # Indicators: single quotes; what single quotes cannot hold: double quotes and escapes.
    ("- a", "'- a'\n"),
    ("a: b", "'a: b'\n"),
    ("a #b", "'a #b'\n"),
    ("#a", "'#a'\n"),
    (" a", "' a'\n"),
    ("a\tb", '"a\\tb"\n'),
    ("😀", '"\\U0001F600"\n'),
    ("\ufeffa", '"\\uFEFF\\x61"\n'),
    ("\x07", '"\\a"\n'),
    ("é", "é\n"),
    ("a\u2028b", "'a\u2028    b'\n"),
    # Line feeds: literal blocks, indented by four, with their chomping and indentation hints.
    ("a\nb", "|-\n    a\n    b\n"),
    ("a\n", "|\n    a\n"),
    (" lead\nx", "|4-\n     lead\n    x\n"),
    (0, "0\n"),
    (-1, "-1\n"),
    (True, "true\n"),
    (None, "null\n"),
    ({}, "{}\n"),
    ([], "[]\n"),
    (
        [{"group": "", "kind": "Status", "version": "v1"}],
        '- group: ""\n  kind: Status\n  version: v1\n',
    ),
    (
        {"a": [1, {"b": [2, 3]}], "c": {"d": "e"}},
        "a:\n    - 1\n    - b:\n        - 2\n        - 3\nc:\n    d: e\n",
    ),
    ([[1, 2], [[3]], {}], "- - 1\n  - 2\n- - - 3\n- {}\n"),
    (
        {"": 1, "true": 2, "k": "line1\nline2", "a\nb": 4},
        '"": 1\n"true": 2\nk: |-\n    line1\n    line2\n? |-\n    a\n    b\n: 4\n',
    ),
    ({"x" * 129: 1}, f"? {'x' * 129}\n: 1\n"),
]


@pytest.mark.parametrize(("value", "expected"), YAML_CASES, ids=[repr(v)[:40] for v, _ in YAML_CASES])
def test_yaml_as_yaml_v3_writes_it(value: Any, expected: str) -> None:
    assert goyaml.dump(value) == expected


def test_numbers_keep_their_json_text() -> None:
    parsed = json.loads(
        "[1.50, 1e3, -0, 12345678901234567890]", parse_int=goyaml.Number, parse_float=goyaml.Number
    )
    assert [goyaml.dump(number) for number in parsed] == ["1.50\n", "1e3\n", "-0\n", "12345678901234567890\n"]


def test_the_declarations_compile_to_gnostic_messages() -> None:
    file = compile_declarations(
        "message Named {\n  string name = 1;\n  repeated Value value = 2;\n}\n"
        "message Value {\n  oneof oneof {\n    bool flag = 1;\n    google.protobuf.Any any = 2;\n  }\n}\n"
    )
    named, value = file.message_type
    assert [(f.name, f.number, f.label, f.type_name) for f in named.field] == [
        ("name", 1, FIELD.LABEL_OPTIONAL, ""),
        ("value", 2, FIELD.LABEL_REPEATED, ".openapi.v2.Value"),
    ]
    assert [(f.name, f.oneof_index, f.type_name) for f in value.field] == [
        ("flag", 0, ""),
        ("any", 0, ".google.protobuf.Any"),
    ]
    assert [o.name for o in value.oneof_decl] == ["oneof"]
    assert len(message_class("Document").DESCRIPTOR.fields) == 16


def test_every_rule_of_gnostic_on_a_rich_document() -> None:
    golden = message_class("Document")()
    text_format.Parse((DATA / "swagger_rich.textproto").read_text(), golden)
    encoded = encode_document((DATA / "swagger_rich.json").read_bytes())
    assert text_format.MessageToString(document(encoded), as_utf8=True) == text_format.MessageToString(
        golden, as_utf8=True
    )
    assert encoded == golden.SerializeToString()


def test_coreio_v2_document_in_protobuf() -> None:
    body = json.dumps(build_documents(KINDS).v2, sort_keys=True, separators=(",", ":")).encode()
    decoded = document(encode_document(body))
    definitions = {pair.name: pair.value for pair in decoded.definitions.additional_properties}
    binding = definitions["io.core.rbac.authorization.v1.RoleBinding"]
    assert binding.required == ["roleRef"]
    assert [pair.name for pair in binding.properties.additional_properties] == sorted(
        ["apiVersion", "kind", "metadata", "roleRef", "subjects"]
    )
    gvk = {pair.name: pair.value.yaml for pair in binding.vendor_extension}
    assert gvk == {
        "x-kubernetes-group-version-kind": (
            "- group: rbac.authorization.core.io\n  kind: RoleBinding\n  version: v1\n"
        )
    }
    paths = {pair.name: pair.value for pair in decoded.paths.path}
    item = paths["/apis/rbac.authorization.core.io/v1/namespaces/{namespace}/rolebindings/{name}"]
    assert [p.parameter.non_body_parameter.path_parameter_sub_schema.name for p in item.parameters[:2]] == [
        "name",
        "namespace",
    ]
    patch = item.patch
    assert patch.parameters[0].parameter.body_parameter.schema._ref == "#/definitions/" + (
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
    )
    responses = {pair.name: pair.value.response for pair in patch.responses.response_code}
    assert responses["200"].schema.schema._ref == "#/definitions/io.core.rbac.authorization.v1.RoleBinding"
    assert (
        decoded.security_definitions.additional_properties[0].value.api_key_security.name == "authorization"
    )
