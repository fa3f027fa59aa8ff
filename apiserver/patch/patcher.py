"""The patch of one PATCH request, as kube-apiserver's patch handler (handlers/patch.go) deals with
it: one class per patch type, which applies itself to the current object and says how upstream
decodes the result. Server-side apply (`application/apply-patch+yaml`) goes through the field
manager instead (`apiserver.apply`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from apiserver.machinery import errors, gofmt, jsonvalue
from apiserver.machinery.types import JSON
from apiserver.patch.decoding import STRICT_VALIDATIONS
from apiserver.patch.json_patch import apply_json_patch
from apiserver.patch.merge import INVALID_JSON_PATCH, apply_merge_patch
from apiserver.patch.schema import PatchSchema
from apiserver.patch.strategic import apply_strategic_merge_patch


class Patcher(ABC):
    """The patch of one PATCH request (server-side apply aside): applies itself to the current
    object and says how upstream decodes the result.

    `strict_errors`: what decoding the patch itself finds under fieldValidation Strict or Warn
    (repeated keys; a JSON patch's unknown operation fields), reported before the result's own.
    `unstructured`: the result becomes the typed object through the unstructured converter (a
    strategic merge patch's) rather than by decoding its JSON.
    """

    unstructured: ClassVar[bool] = False

    def __init__(self, patch: Any, field_validation: str) -> None:
        self.patch = patch
        self.field_validation = field_validation
        strict = field_validation in STRICT_VALIDATIONS
        self.strict_errors = self._strict_errors() if strict else []

    @abstractmethod
    def apply(self, current: JSON) -> JSON:
        """The patched object; `current` (the stored object in Go's field order) is not changed."""

    def quoted(self, patched: JSON) -> str:
        """What a 422 about the result quotes: the patched JSON as json-patch wrote it."""
        return jsonvalue.compact(patched)

    @staticmethod
    def malformed(syntax_error: str, field_validation: str) -> errors.StatusError:
        """The 400 for a patch that is no JSON text, given encoding/json's error for it. Under
        Strict and Warn upstream first decodes a merge or JSON patch strictly, and says so."""
        if field_validation in STRICT_VALIDATIONS:
            return errors.bad_request(f"error decoding patch: {syntax_error}")
        return errors.bad_request(syntax_error)

    def _strict_errors(self) -> list[str]:
        found = jsonvalue.StrictErrors()
        jsonvalue.report_duplicates(self.patch, found)
        return found.messages


class MergePatcher(Patcher):
    def apply(self, current: JSON) -> JSON:
        return apply_merge_patch(current, self.patch, field_validation=self.field_validation)

    @staticmethod
    def malformed(syntax_error: str, field_validation: str) -> errors.StatusError:
        if field_validation in STRICT_VALIDATIONS:
            return errors.bad_request(f"error decoding patch: {syntax_error}")
        return errors.bad_request(INVALID_JSON_PATCH)  # json-patch's MergePatch says no more


class JSONPatcher(Patcher):
    def apply(self, current: JSON) -> JSON:
        return apply_json_patch(current, self.patch, field_validation=self.field_validation)

    def _strict_errors(self) -> list[str]:
        """Decoding the operations strictly into []jsonPatchOp; upstream prefixes each error."""
        found = jsonvalue.StrictErrors()
        if isinstance(self.patch, list):
            for index, operation in enumerate(self.patch):
                if isinstance(operation, dict):
                    _operation_strict_errors(operation, f"[{index}]", found)
        return [f"json patch {message}" for message in found.messages]


_OPERATION_FIELDS = ("op", "path", "from", "value")


def _operation_strict_errors(operation: JSON, path: str, found: jsonvalue.StrictErrors) -> None:
    seen: set[str] = set()
    for key, value in jsonvalue.members(operation):
        child = f"{path}.{key}"
        if key not in _OPERATION_FIELDS:
            found.unknown(child)
            continue
        if key in seen:
            found.duplicate(child)
        seen.add(key)
        if key == "value":
            jsonvalue.report_duplicates(value, found, child)


class StrategicMergePatcher(Patcher):
    unstructured = True

    def __init__(self, patch: Any, field_validation: str, schema: PatchSchema) -> None:
        super().__init__(patch, field_validation)
        self.schema = schema
        self.patch_map: JSON = {}

    def apply(self, current: JSON) -> JSON:
        self.patch_map = {}
        return apply_strategic_merge_patch(current, self.patch, self.schema, self.patch_map)

    @staticmethod
    def malformed(syntax_error: str, field_validation: str) -> errors.StatusError:
        """Decoded into a map in every mode, the error as it is."""
        return errors.bad_request(syntax_error)

    def quoted(self, patched: JSON) -> str:
        """Upstream quotes the map it decoded the patch into as fmt's %+v prints it, after the
        merge has trimmed it."""
        return gofmt.go_v(self.patch_map)
