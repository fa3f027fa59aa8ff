"""The Swagger 2.0 document in gnostic's protobuf encoding, the other form kube-apiserver serves at
/openapi/v2 (what client-go's discovery and kubectl ask for).

kube-openapi makes it from the JSON it serves (ToProtoBinary: gnostic's ParseDocument, then
proto.Marshal); so does `encode_document`, by gnostic's rules:

- every JSON key of a message is its field's name in lowerCamelCase (`$ref` for `_ref`);
- maps are repeated `Named*` pairs in the document's order: `vendor_extension` takes the `x-` keys,
  `path` the `/` ones, `response_code` three digits or `default`, `additional_properties` all;
- extension values, defaults, examples and enum values are `Any` messages holding the value as
  YAML, written as Go's yaml.v3 writes it (`goyaml`);
- a `type` is a list of strings, `items` a list of one schema; the oneof messages (parameters,
  responses, schemas, security schemes, additionalProperties) pick their case from the value;
- scalars take what yaml.v3's reading allows (a string field takes a JSON integer as written, an
  integer field no float), and zero values are left out as proto3 leaves them.

The document must be valid Swagger 2.0 (gnostic would refuse one that is not); its strings must not
hold raw NEL, LS or PS characters (YAML would fold those; JSON encoders escape them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from apiserver.openapi import goyaml, openapiv2

_NAMED_KEYS: dict[str, Callable[[str], object]] = {
    "vendor_extension": lambda key: key.startswith("x-"),
    "path": lambda key: key.startswith("/"),
    "response_code": re.compile(r"[0-9]{3}|default").fullmatch,
    "additional_properties": lambda key: True,
}
_NON_BODY_PARAMETERS = {
    "header": "header_parameter_sub_schema",
    "formData": "form_data_parameter_sub_schema",
    "query": "query_parameter_sub_schema",
    "path": "path_parameter_sub_schema",
}
_SECURITY_SCHEMES: dict[tuple[object, object], str] = {
    ("basic", None): "basic_authentication_security",
    ("apiKey", None): "api_key_security",
    ("oauth2", "implicit"): "oauth2_implicit_security",
    ("oauth2", "password"): "oauth2_password_security",
    ("oauth2", "application"): "oauth2_application_security",
    ("oauth2", "accessCode"): "oauth2_access_code_security",
}
_FILE_SCHEMA_KEYS = frozenset(
    ("format", "title", "description", "default", "required", "type", "readOnly", "externalDocs", "example")
)
_INT64 = range(-(1 << 63), 1 << 63)
_UINT64 = range(1 << 64)


def encode_document(body: bytes) -> bytes:
    """The `openapi.v2.Document` of the Swagger 2.0 JSON `body`, serialized."""
    document = json.loads(body, parse_int=goyaml.Number, parse_float=goyaml.Number)
    message = openapiv2.message_class("Document")()
    _fill(message, document)
    return message.SerializeToString()


def _json_key(field: FieldDescriptor) -> str:
    if field.name == "_ref":
        return "$ref"
    first, *rest = field.name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def _descriptor(message: Message) -> Descriptor:
    # The runtime's (upb's) descriptors are google.protobuf.descriptor's, typed apart in the stubs.
    return cast(Descriptor, message.DESCRIPTOR)


def _fill(message: Message, node: Any) -> None:
    """Sets `message` from the JSON `node` by gnostic's rules for its type."""
    special = _SPECIAL.get(_descriptor(message).name)
    if special is not None:
        special(message, node)
    elif isinstance(node, dict):
        for field in _descriptor(message).fields:
            if field.name in _NAMED_KEYS and field.is_repeated:
                _fill_named(message, field, node)
            elif (key := _json_key(field)) in node:
                _set(message, field, node[key])


def _fill_child(message: Message, name: str, node: Any) -> None:
    child = getattr(message, name)
    _fill(child, node)
    child.SetInParent()  # present even when empty, as gnostic's non-nil pointer is


def _fill_named(message: Message, field: FieldDescriptor, node: dict[str, Any]) -> None:
    wanted = _NAMED_KEYS[field.name]
    pairs = getattr(message, field.name)
    for key, value in node.items():
        if wanted(key):
            pair = pairs.add(name=key)
            _set(pair, _descriptor(pair).fields_by_name["value"], value)


def _set(message: Message, field: FieldDescriptor, value: Any) -> None:
    if field.is_repeated:
        if not isinstance(value, list):
            return
        items = getattr(message, field.name)
        if field.message_type is None:
            items.extend(text for text in map(_string, value) if text is not None)
        else:
            for item in value:
                _fill(items.add(), item)
    elif field.message_type is not None:
        _fill_child(message, field.name, value)
    else:
        scalar = _SCALARS[field.type](value)
        if scalar is not None:
            setattr(message, field.name, scalar)


# ----------------------------------------------------------------------------- scalars
# A JSON value as yaml.v3 reads it: strings are strings, numbers ints (in 64 bits) or floats.


def _int(value: Any) -> int | None:
    if isinstance(value, goyaml.Number) and re.fullmatch(r"-?[0-9]+", value.text):
        number = int(value.text)
        if number in _INT64 or number in _UINT64:
            return number
    return None


def _string(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return value.text if _int(value) is not None else None


def _int64(value: Any) -> int | None:
    number = _int(value)
    return number if number in _INT64 else None


def _double(value: Any) -> float | None:
    if not isinstance(value, goyaml.Number):
        return None
    number = float(value.text)
    return None if number in (float("inf"), float("-inf")) else number


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


_SCALARS: dict[int, Callable[[Any], Any]] = {
    FieldDescriptor.TYPE_STRING: _string,
    FieldDescriptor.TYPE_INT64: _int64,
    FieldDescriptor.TYPE_DOUBLE: _double,
    FieldDescriptor.TYPE_BOOL: _bool,
}


# ----------------------------------------------------------------------------- special messages


def _scalar_text(value: Any) -> str | None:
    """A scalar node's text as yaml.v3 keeps it (None for a mapping or a sequence)."""
    if isinstance(value, str):
        return value
    if isinstance(value, goyaml.Number):
        return value.text
    return None if isinstance(value, dict | list) else json.dumps(value)


def _any(message: Any, node: Any) -> None:
    message.yaml = goyaml.dump(node)


def _type_item(message: Any, node: Any) -> None:
    nodes = node if isinstance(node, list) else [node]
    message.value.extend(text for text in map(_scalar_text, nodes) if text is not None)


def _items_item(message: Any, node: Any) -> None:
    if isinstance(node, dict):
        _fill(message.schema.add(), node)


def _string_array(message: Any, node: Any) -> None:
    if isinstance(node, list):
        message.value.extend(_string(item) or "" for item in node)


def _one_of(choose: Callable[[dict[str, Any]], str | None]) -> Callable[[Message, Any], None]:
    """The filler of a oneof message whose case `choose` picks from the JSON object."""

    def fill(message: Message, node: Any) -> None:
        case = choose(node) if isinstance(node, dict) else None
        if case is not None:
            _fill_child(message, case, node)

    return fill


def _additional_properties(message: Any, node: Any) -> None:
    if isinstance(node, bool):
        message.boolean = node
    elif isinstance(node, dict):
        _fill_child(message, "schema", node)


def _schema_item(node: dict[str, Any]) -> str:
    is_file = node.get("type") == "file" and all(
        key in _FILE_SCHEMA_KEYS or key.startswith("x-") for key in node
    )
    return "file_schema" if is_file else "schema"


_SPECIAL: dict[str, Callable[[Message, Any], None]] = {
    "Any": _any,
    "TypeItem": _type_item,
    "ItemsItem": _items_item,
    "StringArray": _string_array,
    "AdditionalPropertiesItem": _additional_properties,
    "Parameter": _one_of(lambda node: "body_parameter" if node.get("in") == "body" else "non_body_parameter"),
    "NonBodyParameter": _one_of(lambda node: _NON_BODY_PARAMETERS.get(node.get("in", ""))),
    "ParametersItem": _one_of(lambda node: "json_reference" if "$ref" in node else "parameter"),
    "ResponseValue": _one_of(lambda node: "json_reference" if "$ref" in node else "response"),
    "SchemaItem": _one_of(_schema_item),
    "SecurityDefinitionsItem": _one_of(
        lambda node: _SECURITY_SCHEMES.get(
            (node.get("type"), node.get("flow") if node.get("type") == "oauth2" else None)
        )
    ),
}
