"""Query parameters into request options, with the 400s kube-apiserver gives for bad values."""

from __future__ import annotations

from multidict import MultiMapping

from apiserver.machinery import errors
from apiserver.machinery.options import (
    FIELD_VALIDATION_IGNORE,
    FIELD_VALIDATION_STRICT,
    FIELD_VALIDATION_WARN,
    IGNORE_STORE_READ_ERROR,
    DeleteOptions,
    ListOptions,
    Preconditions,
    WriteOptions,
    dry_run_errors,
    parse_dry_run,
)
from apiserver.machinery.selectors import parse_field_selector, parse_label_selector
from apiserver.resources.base import ResourceKind

Query = MultiMapping[str]

_MAX_FIELD_MANAGER = 128
_INT64 = (-(2**63), 2**63 - 1)


def parse_bool(query: Query, name: str) -> bool | None:
    """As upstream's query conversion: absent is unset; "0" and "false" (any case) are false;
    anything else, a bare `?watch` included, is true."""
    value = query.get(name)
    if value is None:
        return None
    return not (value == "0" or value.lower() == "false")


def _int(query: Query, name: str) -> int | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    digits = value[1:] if value[:1] in "+-" else value
    if not (digits.isascii() and digits.isdigit()):
        raise errors.bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax')
    number = int(value)
    if not _INT64[0] <= number <= _INT64[1]:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{value}": value out of range')
    return number


def list_options(query: Query, kind: ResourceKind, *, watch: bool = False) -> ListOptions:
    opts = ListOptions()
    label = query.get("labelSelector")
    if label:
        opts.label_selector = parse_label_selector(label)
    field = query.get("fieldSelector")
    if field:
        opts.field_selector = parse_field_selector(
            field, kind.field_labels, unsupported=kind.field_label_error
        )
    limit = _int(query, "limit")
    opts.limit = limit if limit and limit > 0 else 0
    opts.continue_token = query.get("continue") or ""
    opts.resource_version = query.get("resourceVersion") or ""
    opts.resource_version_match = query.get("resourceVersionMatch") or ""
    opts.watch = watch or bool(parse_bool(query, "watch"))
    # The seed spells it allowWatcokmarks; clients send allowWatchBookmarks. Either turns them on.
    opts.allow_watch_bookmarks = bool(
        parse_bool(query, "allowWatchBookmarks") or parse_bool(query, "allowWatcokmarks")
    )
    opts.send_initial_events = parse_bool(query, "sendInitialEvents")
    timeout = _int(query, "timeoutSeconds")
    opts.timeout_seconds = timeout if timeout is not None and timeout > 0 else None
    opts.validate()
    return opts


def write_options(
    query: Query, options_kind: str, *, patch: bool = False, apply: bool = False, user_agent: str = ""
) -> WriteOptions:
    """Create, update or patch options. `apply`: the patch is a server-side apply, which alone may
    carry `force` and must name its fieldManager. `user_agent` names the manager otherwise."""
    opts = WriteOptions(user_agent=user_agent)
    manager = query.get("fieldManager") or ""
    errs: list[errors.FieldError] = []
    # In ValidatePatchOptions' order: force or the apply's manager, the manager, dryRun, fieldValidation.
    force = parse_bool(query, "force") if patch else None
    if force is not None and not apply:
        errs.append(errors.forbidden("force", "may not be specified for non-apply patch"))
    if apply and not manager:
        errs.append(errors.required("fieldManager", "is required for apply patch"))
    if len(manager) > _MAX_FIELD_MANAGER:
        errs.append(errors.too_long("fieldManager", "", _MAX_FIELD_MANAGER))
    elif any(not ch.isprintable() for ch in manager):
        errs.append(errors.invalid("fieldManager", manager, "must only contain printable characters"))
    dry_run = query.getall("dryRun", [])
    errs += dry_run_errors(dry_run)
    opts.dry_run = bool(dry_run)
    validation = query.get("fieldValidation")
    if validation is not None and validation != "":
        if validation not in (FIELD_VALIDATION_IGNORE, FIELD_VALIDATION_STRICT, FIELD_VALIDATION_WARN):
            errs.append(
                errors.not_supported(
                    "fieldValidation",
                    validation,
                    ["", FIELD_VALIDATION_IGNORE, FIELD_VALIDATION_STRICT, FIELD_VALIDATION_WARN],
                )
            )
        else:
            opts.field_validation = validation
            opts.requested_field_validation = validation
    if errs:
        raise errors.invalid_error("meta.k8s.io", options_kind, "", errs)
    opts.field_manager = manager
    opts.force = bool(force)
    return opts


def delete_options(query: Query) -> DeleteOptions:
    opts = DeleteOptions()
    opts.dry_run = parse_dry_run(query.getall("dryRun", []), "DeleteOptions")
    opts.grace_period_seconds = _int(query, "gracePeriodSeconds")
    policy = query.get("propagationPolicy")
    opts.propagation_policy = policy if policy else None
    opts.orphan_dependents = parse_bool(query, "orphanDependents")
    opts.ignore_store_read_error = bool(parse_bool(query, IGNORE_STORE_READ_ERROR))
    opts.preconditions = Preconditions(
        uid=query.get("preconditions.uid") or None,
        resource_version=query.get("preconditions.resourceVersion") or None,
    )
    return opts
