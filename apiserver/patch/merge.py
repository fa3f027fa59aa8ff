"""JSON merge patch (RFC 7386, `application/merge-patch+json`) as kube-apiserver applies it:
gopkg.in/evanphx/json-patch.v4 `MergePatch`."""

from __future__ import annotations

import copy
from typing import Any

from apiserver.machinery import errors
from apiserver.machinery.gofmt import json_kind
from apiserver.machinery.types import JSON
from apiserver.patch.decoding import STRICT_VALIDATIONS, not_an_object

INVALID_JSON_PATCH = "Invalid JSON Patch"
"""json-patch's ErrBadJSONPatch: a merge patch that is no JSON object."""


def _prune_nulls(value: Any) -> Any:
    """json-patch v4's pruneNulls: null members of objects go, at any depth (null elements of arrays
    stay). It decodes every object it walks, so each marshals as a Go map: keys sorted."""
    if isinstance(value, dict):
        return {k: _prune_nulls(value[k]) for k in sorted(value) if value[k] is not None}
    if isinstance(value, list):
        return [_prune_nulls(v) for v in value]
    return value


def _merge_documents(doc: JSON, patch: JSON) -> JSON:
    """mergeDocs of a patch into a document json-patch has decoded: the result marshals sorted,
    while a value the patch sets as it is keeps its own member order."""
    merged = dict(doc)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif not isinstance(merged.get(key), dict):
            # Absent, null or not an object: the value goes in with its nulls pruned.
            merged[key] = _prune_nulls(value)
        elif not isinstance(value, dict):
            # json-patch v4 keeps a non-object replacing an object as it is, nulls included.
            merged[key] = value
        else:
            merged[key] = _merge_documents(merged[key], value)
    return {key: merged[key] for key in sorted(merged)}


def apply_merge_patch(original: JSON, patch: Any, *, field_validation: str = "Warn") -> JSON:
    """Applies a JSON merge patch (RFC 7386) as kube-apiserver does; `original` is not changed.

    A null member deletes; objects merge recursively; anything else replaces (with the nulls
    inside pruned, as json-patch v4 does). A patch that is not an object is rejected: with 400
    when it cannot be decoded as one, with 422 when (fieldValidation=Ignore) an array replaces
    the whole object.
    """
    if not isinstance(patch, dict):
        if patch is not None and field_validation in STRICT_VALIDATIONS:
            raise errors.bad_request(
                f"error decoding patch: json: cannot unmarshal {json_kind(patch)} "
                "into Go value of type map[string]interface {}"
            )
        if isinstance(patch, list):
            raise not_an_object(_prune_nulls(patch))
        raise errors.bad_request(INVALID_JSON_PATCH)
    return _merge_documents(copy.deepcopy(original), copy.deepcopy(patch))
