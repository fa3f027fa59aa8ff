"""The library's object types (Quantity, URL, Semver, IP, CIDR, NamedFormat) as protobuf messages:
the way cel-expr-python lets a Python function hand CEL an opaque value of a named type."""

from __future__ import annotations

from typing import Any

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

# Upstream's type names, which CEL shows in `type(x)` and in the checker's reports.
_MESSAGES = {
    "kubernetes": ("Quantity", "URL", "Semver", "NamedFormat"),
    "net": ("IP", "CIDR"),
    "kubernetes.authorization": ("Authorizer", "PathCheck", "GroupCheck", "ResourceCheck", "Decision"),
}


def _file(package: str, names: tuple[str, ...]) -> descriptor_pb2.FileDescriptorProto:
    described = descriptor_pb2.FileDescriptorProto(name=f"coreio_cel_{package}.proto", package=package)
    described.syntax = "proto3"
    for name in names:
        message = described.message_type.add(name=name)
        # One string: the value in a canonical form, so that equal values are equal messages.
        message.field.add(
            name="value",
            number=1,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
    return described


POOL = descriptor_pool.DescriptorPool()
for _package, _names in _MESSAGES.items():
    POOL.Add(_file(_package, _names))


def _message_class(name: str) -> Any:
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(name))


Quantity = _message_class("kubernetes.Quantity")
URL = _message_class("kubernetes.URL")
Semver = _message_class("kubernetes.Semver")
IP = _message_class("net.IP")
CIDR = _message_class("net.CIDR")

NamedFormat = _message_class("kubernetes.NamedFormat")

QUANTITY = cel.Type("kubernetes.Quantity")
URL_TYPE = cel.Type("kubernetes.URL")
SEMVER_TYPE = cel.Type("kubernetes.Semver")
IP_TYPE = cel.Type("net.IP")
CIDR_TYPE = cel.Type("net.CIDR")
NAMED_FORMAT_TYPE = cel.Type("kubernetes.NamedFormat")

# The authorizer library's types: each holds its state (who asks, what is checked) as JSON.
Authorizer = _message_class("kubernetes.authorization.Authorizer")
PathCheck = _message_class("kubernetes.authorization.PathCheck")
GroupCheck = _message_class("kubernetes.authorization.GroupCheck")
ResourceCheck = _message_class("kubernetes.authorization.ResourceCheck")
Decision = _message_class("kubernetes.authorization.Decision")

AUTHORIZER_TYPE = cel.Type("kubernetes.authorization.Authorizer")
PATH_CHECK_TYPE = cel.Type("kubernetes.authorization.PathCheck")
GROUP_CHECK_TYPE = cel.Type("kubernetes.authorization.GroupCheck")
RESOURCE_CHECK_TYPE = cel.Type("kubernetes.authorization.ResourceCheck")
DECISION_TYPE = cel.Type("kubernetes.authorization.Decision")
