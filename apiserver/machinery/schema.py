"""The wire schema of a kind, and the decoding of a request body into its canonical JSON.

Models are pydantic classes named like upstream's Go structs, with fields named like the JSON keys and
declared in the Go struct's order. Each field carries a `Go` marker in its `Annotated` metadata that
says how Go's encoding/json treats it (omitempty, pointer or value, int32/int64, Time/MicroTime).
`fields_of(model)` turns a model into `FieldSpec`s; the decoder here and the OpenAPI generator both
read those.

Decoding follows upstream's JSON decoder (case-sensitive keys, unknown fields dropped and, with
repeated ones, reported as its strict mode reports them) and then marshals the result as Go's
encoding/json would: struct order, omitempty, value structs always present, a zero Time as null.
A strategic merge patch's result is decoded as upstream's unstructured converter decodes it instead,
with that converter's rules and wording.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from apiserver.machinery import gotime, jsonvalue
from apiserver.machinery.errors import StatusError
from apiserver.machinery.gofmt import json_kind
from apiserver.machinery.types import JSON


@dataclass
class Decoded:
    """A decoded body. `unknown_fields` are JSON paths (`spec.foo`, `subjects[0].bar`) of fields the
    schema does not know, in document order; they are already removed from `obj`. `strict_errors`
    are what fieldValidation=Strict refuses and Warn warns of, worded and ordered as upstream's
    decoder reports them: `unknown field "spec"`, `duplicate field "metadata.name"`."""

    obj: JSON
    unknown_fields: list[str] = field(default_factory=list)
    strict_errors: list[str] = field(default_factory=list)


# Values of Go.format.
INT32 = "int32"
INT64 = "int64"
TIME = "time"  # metav1.Time: gotime.TIME_LAYOUT (RFC 3339), whole seconds
MICRO_TIME = "micro-time"  # metav1.MicroTime: gotime.MICRO_TIME_LAYOUT, six fraction digits

# Go's package name of every struct served here (metav1, corev1, rbacv1, eventsv1 are all "v1").
GO_PACKAGE = "v1"


@dataclass(frozen=True)
class Go:
    """How upstream's Go struct declares a field.

    omitempty: the JSON tag has `,omitempty` (has no effect on value structs and Times, as in Go).
    pointer: the Go field is a pointer (*int64, *bool, *Time, *Struct): absent stays absent, while a
        present zero value is kept.
    format: INT32/INT64 for integers (default INT64), TIME/MICRO_TIME for timestamps held as str.
    type_name: the Go type of a string field declared with a named type (`types.UID`), which
        decoding errors name.
    """

    omitempty: bool = False
    pointer: bool = False
    format: str = ""
    type_name: str = ""


@dataclass(frozen=True)
class Scalar:
    name: str  # "string", "bool", "int32", "int64"
    named: str = ""  # the Go type where the field's is a named one (`types.UID`)


@dataclass(frozen=True)
class Timestamp:
    micro: bool


@dataclass(frozen=True)
class Struct:
    model: type[BaseModel]


@dataclass(frozen=True)
class ListOf:
    item: TypeSpec


@dataclass(frozen=True)
class MapOf:
    """map[string]<value>."""

    value: TypeSpec


@dataclass(frozen=True)
class FreeForm:
    """Any JSON object, kept as given (metav1.FieldsV1)."""


TypeSpec = Scalar | Timestamp | Struct | ListOf | MapOf | FreeForm


@dataclass(frozen=True)
class FieldSpec:
    """One field of a struct, everything OpenAPI and the decoder need about it."""

    name: str
    type: TypeSpec
    go: Go
    description: str
    required: bool
    extensions: dict[str, Any] = field(default_factory=dict)


def go_type_name(spec: TypeSpec) -> str:
    """The Go type as upstream's decoder names it in errors (`[]v1.Subject`, `map[string]string`)."""
    if isinstance(spec, Scalar):
        return spec.named or spec.name
    if isinstance(spec, Timestamp):
        return f"{GO_PACKAGE}.MicroTime" if spec.micro else f"{GO_PACKAGE}.Time"
    if isinstance(spec, Struct):
        return f"{GO_PACKAGE}.{spec.model.__name__}"
    if isinstance(spec, ListOf):
        return "[]" + go_type_name(spec.item)
    if isinstance(spec, MapOf):
        return "map[string]" + go_type_name(spec.value)
    return f"{GO_PACKAGE}.FieldsV1"


def _type_spec(annotation: Any, go: Go) -> TypeSpec:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {annotation!r}")
        return _type_spec(args[0], go)
    if origin is list:
        (item,) = get_args(annotation)
        return ListOf(_type_spec(item, Go()))
    if origin is dict:
        key, value = get_args(annotation)
        if key is not str:
            raise TypeError(f"map keys must be str: {annotation!r}")
        return FreeForm() if value is Any else MapOf(_type_spec(value, Go()))
    if annotation is str:
        if go.format in (TIME, MICRO_TIME):
            return Timestamp(micro=go.format == MICRO_TIME)
        return Scalar("string", go.type_name)
    if annotation is bool:
        return Scalar("bool")
    if annotation is int:
        return Scalar(go.format or INT64)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return Struct(annotation)
    raise TypeError(f"unsupported field type {annotation!r}")


@cache
def fields_of(model: type[BaseModel]) -> tuple[FieldSpec, ...]:
    """The fields of a model in Go struct order."""
    specs: list[FieldSpec] = []
    for name, info in model.model_fields.items():
        go = next((m for m in info.metadata if isinstance(m, Go)), Go())
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        specs.append(
            FieldSpec(
                name=info.alias or name,
                type=_type_spec(info.annotation, go),
                go=go,
                description=info.description or "",
                required=info.is_required(),
                extensions=dict(extra),
            )
        )
    return tuple(specs)


# ----------------------------------------------------------------------------- timestamps

_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)


def parse_rfc3339(text: str) -> datetime | None:
    """A metav1.Time (RFC 3339, any offset, any fraction of a second) in UTC, truncated to
    microseconds; None if Go refuses it. Go's zero time (0001-01-01T00:00:00Z) parses as itself."""
    try:
        return gotime.parse(gotime.TIME_LAYOUT, text)
    except gotime.TimeParseError:
        return None


def format_timestamp(moment: datetime, *, micro: bool) -> str:
    """metav1.Time (`2026-11-22T02:16:41Z`) or metav1.MicroTime (`2026-11-22T02:16:41.123456Z`)."""
    moment = moment.astimezone(UTC)
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    if micro:
        text += f".{moment.microsecond:06d}"
    return text + "Z"


def canonical_timestamp(text: str, *, micro: bool) -> str | None:
    """The canonical form of a timestamp, None for Go's zero time; gotime.TimeParseError (a
    ValueError, Go's words) if its layout refuses it."""
    moment = gotime.parse(gotime.MICRO_TIME_LAYOUT if micro else gotime.TIME_LAYOUT, text)
    if moment == _ZERO_TIME:
        return None
    return format_timestamp(moment, micro=micro)


# ----------------------------------------------------------------------------- decoding


def cannot_handle(kind: str, version: str) -> str:
    """How kube-apiserver prefixes the error of a create or update body it cannot decode."""
    return f'{kind} in version "{version}" cannot be handled as a {kind}: '


class DecodeError(StatusError):
    """A body that does not decode into the kind's struct. A create or update answers it as this
    400; a patch quotes `detail`, the decoder's own error, in a 422 on the field `patch`."""

    def __init__(self, kind: str, version: str, detail: str) -> None:
        super().__init__(400, "BadRequest", cannot_handle(kind, version) + detail)
        self.detail = detail


class _TypeMismatch(Exception):
    pass


def _reflect_kind(value: Any) -> str:
    """The reflect.Kind of a value as the unstructured converter holds it."""
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "slice"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    return "string"


_INT_RANGES = {INT32: (-(2**31), 2**31 - 1), INT64: (-(2**63), 2**63 - 1)}


_OMITTED: Any = object()
"""A field encoding/json leaves out (omitempty)."""


class _Unmarshal:
    """What both decoders share: marshalling the decoded fields as Go's encoding/json would."""

    def marshal(self, specs: tuple[FieldSpec, ...], values: dict[str, Any]) -> JSON:
        out: JSON = {}
        for spec in specs:
            value = self._marshal_field(spec, spec.name in values, values.get(spec.name))
            if value is not _OMITTED:
                out[spec.name] = value
        return out

    def _marshal_field(self, spec: FieldSpec, present: bool, value: Any) -> Any:
        """One field as encoding/json writes it, or _OMITTED."""
        t, go = spec.type, spec.go
        if isinstance(t, Timestamp) and not go.pointer:
            return value  # a value Time: never omitted; zero marshals as null
        if isinstance(t, Struct) and not go.pointer:
            return value if present else self.zero(t)
        if go.pointer or isinstance(t, FreeForm):
            if present and value is not None:
                return value
            return _OMITTED if go.omitempty else None
        if isinstance(t, ListOf | MapOf):
            if not present:
                return _OMITTED if go.omitempty else None
        elif not present:
            value = self.zero(t)
        return value if value or not go.omitempty else _OMITTED

    def zero(self, t: TypeSpec) -> Any:
        if isinstance(t, Scalar):
            return "" if t.name == "string" else False if t.name == "bool" else 0
        if isinstance(t, Struct):
            return self.marshal(fields_of(t.model), {})
        return None


class _Decoder(_Unmarshal):
    """sigs.k8s.io/json decoding a body into the kind's struct (case-sensitive keys): the first type
    error in text order fails it; unknown and repeated fields are strict errors, in text order. A
    repeated field's every value is decoded (as Go does), the last one kept."""

    def __init__(self) -> None:
        self.unknown: list[str] = []
        self.strict = jsonvalue.StrictErrors()

    def struct(self, model: type[BaseModel], data: JSON, path: str, stack: tuple[str, ...]) -> JSON:
        specs = fields_of(model)
        by_name = {spec.name: spec for spec in specs}
        values: dict[str, Any] = {}
        seen: set[str] = set()
        for key, raw in jsonvalue.members(data):
            child = jsonvalue.join(path, key)
            spec = by_name.get(key)
            if spec is None:
                if child not in self.unknown:
                    self.unknown.append(child)
                self.strict.unknown(child)
                continue
            if key in seen:
                self.strict.duplicate(child)
            seen.add(key)
            if raw is None:  # null: the field stays (or becomes) unset
                values.pop(key, None)
                continue
            values[key] = self.value(spec.type, raw, child, (*stack, key), model.__name__)
        return self.marshal(specs, values)

    def value(self, t: TypeSpec, raw: Any, path: str, stack: tuple[str, ...], owner: str) -> Any:
        if isinstance(t, Scalar):
            return self.scalar(t, raw, stack, owner)
        if isinstance(t, Timestamp):
            return self.timestamp(t, raw, stack, owner)
        if isinstance(t, Struct):
            if not isinstance(raw, dict):
                raise self.mismatch(json_kind(raw), stack, owner, go_type_name(t))
            return self.struct(t.model, raw, path, stack)
        if isinstance(t, ListOf):
            if not isinstance(raw, list):
                raise self.mismatch(json_kind(raw), stack, owner, go_type_name(t))
            return [
                self.zero(t.item) if item is None else self.value(t.item, item, f"{path}[{i}]", stack, owner)
                for i, item in enumerate(raw)
            ]
        if isinstance(t, MapOf):
            if not isinstance(raw, dict):
                raise self.mismatch(json_kind(raw), stack, owner, go_type_name(t))
            return self.map(t, raw, path, stack, owner)
        if not isinstance(raw, dict):
            raise self.mismatch(json_kind(raw), stack, owner, go_type_name(t))
        # FieldsV1 keeps its raw JSON: nothing inside it is checked.
        return jsonvalue.plain(raw)

    def map(self, t: MapOf, raw: JSON, path: str, stack: tuple[str, ...], owner: str) -> JSON:
        out: JSON = {}
        for key, item in jsonvalue.members(raw):
            child = jsonvalue.join(path, key)
            if key in out:
                self.strict.duplicate(child)
            out[key] = self.zero(t.value) if item is None else self.value(t.value, item, child, stack, owner)
        return out

    def timestamp(self, t: Timestamp, raw: Any, stack: tuple[str, ...], owner: str) -> str | None:
        if not isinstance(raw, str):
            # Upstream's Time.UnmarshalJSON first decodes a JSON string.
            raise self.mismatch(json_kind(raw), stack, owner, "string")
        try:
            return canonical_timestamp(raw, micro=t.micro)
        except gotime.TimeParseError as exc:
            # UnmarshalJSON's own error: encoding/json names no field for it.
            raise _TypeMismatch(str(exc)) from None

    def scalar(self, t: Scalar, raw: Any, stack: tuple[str, ...], owner: str) -> Any:
        if t.name == "string":
            if isinstance(raw, str):
                return raw
        elif t.name == "bool":
            if isinstance(raw, bool):
                return raw
        elif isinstance(raw, int | float) and not isinstance(raw, bool):
            low, high = _INT_RANGES[t.name]
            if isinstance(raw, int) and low <= raw <= high:
                return raw
            raise self.mismatch(f"number {raw!r}", stack, owner, t.name)
        raise self.mismatch(json_kind(raw), stack, owner, go_type_name(t))

    @staticmethod
    def mismatch(what: str, stack: tuple[str, ...], owner: str, go_type: str) -> _TypeMismatch:
        return _TypeMismatch(
            f"json: cannot unmarshal {what} into Go struct field {owner}.{'.'.join(stack)} of type {go_type}"
        )


def _wrap(value: int, width: str) -> int:
    """Go's conversion of an int64 to int32 (or int64): the low bits, as a signed number."""
    low, high = _INT_RANGES[width]
    span = high - low + 1
    return (value - low) % span + low


class _Converter(_Unmarshal):
    """runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation, which turns a strategic
    merge patch's result into the typed object. It walks a struct's fields in declaration order (the
    first error is the first such field's), converts numbers as reflect does (an int64 truncated to
    an int32, a whole float64 taken as an integer), and words its errors its own way. Unknown
    fields are reported sorted; a map holds no repeated keys to report."""

    def __init__(self) -> None:
        self.unknown: list[str] = []

    def struct(self, model: type[BaseModel], data: Any, path: str) -> JSON:
        if not isinstance(data, dict):
            raise _TypeMismatch(f"cannot restore struct from: {_reflect_kind(data)}")
        specs = fields_of(model)
        values: dict[str, Any] = {}
        for spec in specs:
            raw = data.get(spec.name)
            if raw is not None:
                values[spec.name] = self.value(spec.type, raw, jsonvalue.join(path, spec.name))
        names = {spec.name for spec in specs}
        self.unknown.extend(jsonvalue.join(path, key) for key in data if key not in names)
        return self.marshal(specs, values)

    def value(self, t: TypeSpec, raw: Any, path: str) -> Any:
        if isinstance(t, Scalar):
            return _convert_scalar(t, raw)
        if isinstance(t, Timestamp):
            return _convert_timestamp(t, raw)
        if isinstance(t, Struct):
            return self.struct(t.model, raw, path)
        if isinstance(t, ListOf):
            if not isinstance(raw, list):
                raise _TypeMismatch(f"cannot restore slice from {_reflect_kind(raw)}")
            return [self.item(t.item, item, f"{path}[{i}]") for i, item in enumerate(raw)]
        if isinstance(t, MapOf):
            if not isinstance(raw, dict):
                raise _TypeMismatch(f"cannot restore map from {_reflect_kind(raw)}")
            return {key: self.item(t.value, item, jsonvalue.join(path, key)) for key, item in raw.items()}
        if not isinstance(raw, dict):
            # Upstream's FieldsV1 would keep any JSON; managedFields here must hold objects.
            kind = json_kind(raw)
            raise _TypeMismatch(f"json: cannot unmarshal {kind} into Go value of type {go_type_name(t)}")
        return jsonvalue.plain(raw)

    def item(self, t: TypeSpec, raw: Any, path: str) -> Any:
        """An element of a slice or map: null is the element type's zero value."""
        return self.zero(t) if raw is None else self.value(t, raw, path)


def _convert_scalar(t: Scalar, raw: Any) -> Any:
    if t.name == "string":
        if isinstance(raw, str):
            return raw
        if _reflect_kind(raw) == "int64":
            # Go converts an integer to a string type (as a rune), so the converter refuses it by name.
            raise _TypeMismatch(f"cannot convert int64 to {go_type_name(t)}")
    elif t.name == "bool":
        if isinstance(raw, bool):
            return raw
    elif isinstance(raw, int) and not isinstance(raw, bool):
        return _wrap(raw, t.name)
    elif isinstance(raw, float):
        if raw == int(raw):
            return _wrap(int(raw), t.name)
        raise _TypeMismatch(f"cannot convert float64 to {t.name}")
    # Kinds that do not convert at all (a string to a number, anything to a bool) fall through to
    # the converter's catch-all, which names the destination's kind.
    raise _TypeMismatch(f"unrecognized type: {t.name}")


def _convert_timestamp(t: Timestamp, raw: Any) -> str | None:
    """Time.UnmarshalJSON of the value marshalled back to JSON: it must be a JSON string."""
    if not isinstance(raw, str):
        raise _TypeMismatch(f"json: cannot unmarshal {json_kind(raw)} into Go value of type string")
    try:
        return canonical_timestamp(raw, micro=t.micro)
    except gotime.TimeParseError as exc:
        raise _TypeMismatch(str(exc)) from None


def decode_object(
    model: type[BaseModel], data: Any, *, kind: str, version: str, unstructured: bool = False
) -> Decoded:
    """The canonical object of a parsed request body, with its unknown fields pruned and reported.

    Raises DecodeError (400) on a type error, worded as kube-apiserver words it:
    `RoleBinding in version "v1" cannot be handled as a RoleBinding: json: cannot unmarshal string
    into Go struct field RoleBinding.subjects of type []v1.Subject`. With `unstructured`, `data` is
    converted as a strategic merge patch's result is, errors worded as that converter words them.
    """
    if not isinstance(data, dict):
        detail = f"json: cannot unmarshal {json_kind(data)} into Go value of type {GO_PACKAGE}.{kind}"
        raise DecodeError(kind, version, detail)
    if unstructured:
        converter = _Converter()
        try:
            obj = converter.struct(model, data, "")
        except _TypeMismatch as exc:
            raise DecodeError(kind, version, str(exc)) from None
        found = sorted(f'unknown field "{path}"' for path in converter.unknown)
        return Decoded(obj, converter.unknown, found)
    decoder = _Decoder()
    try:
        obj = decoder.struct(model, data, "", ())
    except _TypeMismatch as exc:
        raise DecodeError(kind, version, str(exc)) from None
    return Decoded(obj, decoder.unknown, decoder.strict.messages)
