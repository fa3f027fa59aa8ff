"""Request bodies decoded into objects of one kind, as upstream's codecs and handlers decode them:
the type check, fieldValidation's strict decoding errors (or warnings), YAML's repeated keys, a
patch's result and an apply configuration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apiserver.machinery import errors
from apiserver.machinery.gofmt import json_kind
from apiserver.machinery.options import (
    FIELD_VALIDATION_IGNORE,
    FIELD_VALIDATION_STRICT,
    FIELD_VALIDATION_WARN,
    WriteOptions,
)
from apiserver.machinery.schema import DecodeError, cannot_handle
from apiserver.machinery.types import JSON
from apiserver.patch import Patcher, check_type_meta, invalid_patch
from apiserver.registry.stored import typed
from apiserver.resources.base import ResourceKind


def strict_decoding_error(found: list[str]) -> str:
    """runtime.NewStrictDecodingError: every unknown and repeated field in one message."""
    return "strict decoding error: " + ", ".join(found)


def yaml_unmarshal_errors(lines: Sequence[str]) -> str:
    """yaml.v2's error of a YAML document's repeated keys, one line each."""
    return "yaml: unmarshal errors:\n" + "\n".join(f"  {line}" for line in lines)


def _check_type(kind: ResourceKind, raw: Any) -> None:
    if not isinstance(raw, dict):
        raise errors.bad_request(
            f"the object provided is unrecognized (must be of type {kind.kind}): "
            f"couldn't get version/kind; json parse error: expected an object"
        )
    api_version = raw.get("apiVersion")
    found = raw.get("kind")
    if api_version not in (None, "") and api_version != kind.api_version:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version "
            f"({kind.api_version})"
        )
    if found not in (None, "") and found != kind.kind:
        raise errors.bad_request(
            f'{found} in version "{kind.version}" cannot be handled as a {kind.kind}: '
            f'no kind "{found}" is registered for version "{kind.api_version}" in scheme "coreio"'
        )


def decode_body(
    kind: ResourceKind,
    raw: Any,
    options: WriteOptions,
    warnings: list[str],
    yaml_duplicates: Sequence[str] = (),
) -> JSON:
    """A create or update body: its type checked, unknown fields pruned per fieldValidation.
    `yaml_duplicates`: a YAML body's repeated keys (codec.ParsedBody)."""
    _check_type(kind, raw)
    decoded = kind.decode(raw)
    _check_strict(kind, decoded.strict_errors, yaml_duplicates, options, warnings)
    return typed(kind, decoded.obj)


def _check_strict(
    kind: ResourceKind,
    found: list[str],
    yaml_duplicates: Sequence[str],
    options: WriteOptions,
    warnings: list[str],
) -> None:
    """fieldValidation of a create or update body. Strict: one 400 naming every unknown and
    repeated field, a YAML body's repeated keys first (yaml.v2 reports them as one error).
    Warn: a warning each, yaml.v2's lines split apart as upstream splits them."""
    if options.field_validation == FIELD_VALIDATION_WARN:
        warnings.extend([*yaml_duplicates, *found])
    elif options.field_validation == FIELD_VALIDATION_STRICT and (yaml_duplicates or found):
        yaml_error = [yaml_unmarshal_errors(yaml_duplicates)] if yaml_duplicates else []
        prefix = cannot_handle(kind.kind, kind.version)
        raise errors.bad_request(prefix + strict_decoding_error(yaml_error + found))


def decode_patched(
    kind: ResourceKind, patcher: Patcher, result: JSON, options: WriteOptions, warnings: list[str]
) -> JSON:
    """A patch's result decoded as upstream's patch handler decodes it: what does not decode is
    a 422 on the field `patch` quoting the result, and so, under Strict, is every strict error
    (the patch's own first, then the result's); under Warn each is a warning."""
    try:
        if not patcher.unstructured:
            check_type_meta(result, kind.api_version, kind.kind)
        decoded = kind.decode(result, unstructured=patcher.unstructured)
    except DecodeError as exc:
        raise invalid_patch(patcher.quoted(result), exc.detail) from None
    if options.field_validation != FIELD_VALIDATION_IGNORE:
        found = patcher.strict_errors + decoded.strict_errors
        if found and options.field_validation == FIELD_VALIDATION_STRICT:
            raise invalid_patch(patcher.quoted(result), strict_decoding_error(found))
        warnings.extend(found)
    return typed(kind, decoded.obj)


def apply_configuration(config: Any) -> JSON:
    """A decoded apply patch as the configuration object it must be (null: an empty one)."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise errors.bad_request(
            "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot "
            f"unmarshal {json_kind(config)} into Go value of type map[string]interface {{}}"
        )
    return config


def check_apply_duplicates(lines: Sequence[str], opts: WriteOptions, warnings: list[str]) -> None:
    """An apply configuration's repeated keys: 400 under Strict, a warning each under Warn."""
    if not lines or opts.field_validation == FIELD_VALIDATION_IGNORE:
        return
    if opts.field_validation == FIELD_VALIDATION_STRICT:
        yaml_error = yaml_unmarshal_errors(lines)
        raise errors.bad_request(f"error strict decoding YAML: error converting YAML to JSON: {yaml_error}")
    warnings.extend(lines)
