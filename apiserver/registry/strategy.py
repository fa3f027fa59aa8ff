"""What happens to an object on its way into storage, as upstream's rest.BeforeCreate and
rest.BeforeUpdate do it: system metadata set or kept, the kind's strategy hooks, then validation."""

from __future__ import annotations

from apiserver.machinery import errors, objectmeta, uids
from apiserver.machinery.errors import StatusError
from apiserver.machinery.metav1 import validate_common_object_meta_update
from apiserver.machinery.types import JSON
from apiserver.resources.base import ResourceKind


def prepare_create(kind: ResourceKind, obj: JSON) -> None:
    meta = objectmeta.metadata(obj)
    meta["uid"] = uids.new()
    meta["creationTimestamp"] = objectmeta.now_text()
    meta.pop("deletionTimestamp", None)
    meta.pop("deletionGracePeriodSeconds", None)
    meta.pop("selfLink", None)
    # No generation of the server's: upstream leaves it to the kind's strategy, and neither
    # kind's sets one, so the field stays absent unless the request itself carries it.
    kind.prepare_for_create(obj)


def prepare_update(kind: ResourceKind, new: JSON, old: JSON, subresource: str = "") -> None:
    meta = objectmeta.metadata(new)
    old_meta = old["metadata"]
    if not meta.get("uid"):
        meta["uid"] = old_meta.get("uid")
    for system_field in ("creationTimestamp", "deletionTimestamp"):
        if old_meta.get(system_field):
            meta[system_field] = old_meta[system_field]
        else:
            meta.pop(system_field, None)
    if "deletionGracePeriodSeconds" in old_meta and "deletionGracePeriodSeconds" not in meta:
        meta["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"]
    meta["resourceVersion"] = old_meta["resourceVersion"]
    meta.pop("selfLink", None)
    # A request cannot set generation (rest.BeforeUpdate keeps the stored one) and neither
    # kind's strategy moves it on a change.
    if old_meta.get("generation"):
        meta["generation"] = old_meta["generation"]
    else:
        meta.pop("generation", None)
    kind.keep_to_subresource(new, old, subresource)
    if subresource != "status":
        kind.prepare_for_update(new, old)


def validate_create(kind: ResourceKind, obj: JSON) -> None:
    _refuse(kind, obj, kind.validate(obj))


def prepare_and_validate_create(kind: ResourceKind, obj: JSON) -> None:
    """Both steps of a create after admission, as one (machinery.offload runs them off the loop)."""
    prepare_create(kind, obj)
    validate_create(kind, obj)


def validate_update(kind: ResourceKind, new: JSON, old: JSON, subresource: str = "") -> None:
    """rest.BeforeUpdate's checks of any kind's metadata, then the kind's own (its status's, for a
    write through /status): kube-apiserver reports an error of both in each (twice in the causes,
    once in the message), in that order."""
    common = validate_common_object_meta_update(new["metadata"], old["metadata"], namespaced=kind.namespaced)
    own = kind.validate_status_update(new, old) if subresource == "status" else kind.validate_update(new, old)
    _refuse(kind, new, common + own)


def _refuse(kind: ResourceKind, obj: JSON, errs: list[errors.FieldError]) -> None:
    if errs:
        name = str(objectmeta.metadata(obj).get("name") or "")
        raise errors.invalid_error(kind.group, kind.kind, name, errs)


def check_namespace(meta: JSON, namespace: str) -> None:
    """The request's namespace, which a body may repeat but not contradict."""
    body_namespace = meta.get("namespace")
    if body_namespace and body_namespace != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    meta["namespace"] = namespace


def name_mismatch(body_name: str, url_name: str) -> StatusError:
    return errors.bad_request(
        f"the name of the object ({body_name}) does not match the name on the URL ({url_name})"
    )
