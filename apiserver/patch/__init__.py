"""The patch types kube-apiserver accepts for built-in kinds, applied to plain JSON objects.

- `merge`: JSON merge patch (RFC 7386, `application/merge-patch+json`);
- `json_patch`: JSON patch (RFC 6902, `application/json-patch+json`) with json-patch v4's looser rules;
- `strategic`: strategic merge patch (`application/strategic-merge-patch+json`), driven by a
  `schema.PatchSchema` (with `stable_sort`, Go's stable sort, for the order of merged lists);
- `patcher`: one PATCH request's patch of any of those types; `decoding`: what they share.

Server-side apply (`application/apply-patch+yaml`) is the field manager's, in `apiserver.apply`.
"""

from apiserver.patch.decoding import STRICT_VALIDATIONS, check_type_meta, invalid_patch
from apiserver.patch.json_patch import MAX_JSON_PATCH_COPY_BYTES, MAX_JSON_PATCH_OPERATIONS, apply_json_patch
from apiserver.patch.merge import apply_merge_patch
from apiserver.patch.patcher import JSONPatcher, MergePatcher, Patcher, StrategicMergePatcher
from apiserver.patch.schema import (
    OBJECT_META_PATCH_SCHEMA,
    PatchSchema,
    PatchStrategy,
)
from apiserver.patch.strategic import apply_strategic_merge_patch

__all__ = [
    "MAX_JSON_PATCH_COPY_BYTES",
    "MAX_JSON_PATCH_OPERATIONS",
    "OBJECT_META_PATCH_SCHEMA",
    "STRICT_VALIDATIONS",
    "JSONPatcher",
    "MergePatcher",
    "PatchSchema",
    "PatchStrategy",
    "Patcher",
    "StrategicMergePatcher",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
    "check_type_meta",
    "invalid_patch",
]
