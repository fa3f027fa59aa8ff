"""Request options (list, watch, write, delete) as the registry takes them, and their validation.

The HTTP layer parses query strings and bodies into these; everything here is free of HTTP.
Validation follows k8s.io/apimachinery's metainternalversion/validation for ListOptions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from apiserver.machinery import errors
from apiserver.machinery.errors import FieldError
from apiserver.machinery.selectors import FieldSelector, LabelSelector
from apiserver.machinery.user import UserInfo

MATCH_EXACT = "Exact"
MATCH_NOT_OLDER_THAN = "NotOlderThan"
DRY_RUN_ALL = "All"

FIELD_VALIDATION_STRICT = "Strict"
FIELD_VALIDATION_WARN = "Warn"
FIELD_VALIDATION_IGNORE = "Ignore"

PROPAGATION_POLICIES = ("Orphan", "Background", "Foreground")


@dataclass
class ListOptions:
    label_selector: LabelSelector | None = None
    field_selector: FieldSelector | None = None
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    resource_version_match: str = ""
    watch: bool = False
    allow_watch_bookmarks: bool = False
    send_initial_events: bool | None = None
    timeout_seconds: int | None = None

    def validate(self) -> None:
        """Raises a 422 Invalid on kind ListOptions, as kube-apiserver's ValidateListOptions."""
        errs = self._watch_errors() if self.watch else self._list_errors()
        if errs:
            raise errors.invalid_error("meta.k8s.io", "ListOptions", "", errs)

    def _list_errors(self) -> list[FieldError]:
        errs: list[FieldError] = []
        match = self.resource_version_match
        if match:
            if not self.resource_version:
                errs.append(
                    errors.forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    )
                )
            if self.continue_token:
                errs.append(
                    errors.forbidden(
                        "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"
                    )
                )
            if match not in (MATCH_EXACT, MATCH_NOT_OLDER_THAN):
                errs.append(
                    errors.not_supported(
                        "resourceVersionMatch", match, [MATCH_EXACT, MATCH_NOT_OLDER_THAN, ""]
                    )
                )
            if match == MATCH_EXACT and self.resource_version == "0":
                errs.append(
                    errors.forbidden(
                        "resourceVersionMatch",
                        'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                    )
                )
        if self.send_initial_events is not None:
            errs.append(errors.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
        return errs

    def _watch_errors(self) -> list[FieldError]:
        errs: list[FieldError] = []
        match = self.resource_version_match
        if self.send_initial_events is not None:
            if match != MATCH_NOT_OLDER_THAN:
                errs.append(
                    errors.forbidden(
                        "resourceVersionMatch",
                        f"sendInitialEvents requires setting resourceVersionMatch to {MATCH_NOT_OLDER_THAN}",
                    )
                )
            if self.send_initial_events and not self.allow_watch_bookmarks:
                errs.append(
                    errors.forbidden(
                        "allowWatchBookmarks", "sendInitialEvents requires allowWatchBookmarks=true"
                    )
                )
        if match:
            if self.send_initial_events is None:
                errs.append(
                    errors.forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    )
                )
            if match != MATCH_NOT_OLDER_THAN:
                errs.append(errors.not_supported("resourceVersionMatch", match, [MATCH_NOT_OLDER_THAN]))
            if self.continue_token:
                errs.append(
                    errors.forbidden(
                        "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"
                    )
                )
        return errs

    @property
    def has_selectors(self) -> bool:
        return bool(
            (self.label_selector and not self.label_selector.empty)
            or (self.field_selector and not self.field_selector.empty)
        )


@dataclass
class WriteOptions:
    dry_run: bool = False
    field_manager: str = ""
    field_validation: str = FIELD_VALIDATION_WARN
    force: bool = False
    # The request's User-Agent: whom managedFields name when no fieldManager is given.
    user_agent: str = ""
    # Who asks (admission checks such as the RoleBinding escalation guard need it).
    user: UserInfo | None = None
    # fieldValidation as the request named it ("" when it did not), for admission's options object.
    requested_field_validation: str = ""
    # The subresource written through ("status"), or "" for the object itself.
    subresource: str = ""


@dataclass
class Preconditions:
    uid: str | None = None
    resource_version: str | None = None


IGNORE_STORE_READ_ERROR = "ignoreStoreReadErrorWithClusterBreakingPotential"


@dataclass
class DeleteOptions:
    dry_run: bool = False
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    preconditions: Preconditions = field(default_factory=Preconditions)
    orphan_dependents: bool | None = None
    # ignoreStoreReadErrorWithClusterBreakingPotential: remove an object that no longer decodes.
    ignore_store_read_error: bool = False
    # Who asks (for admission).
    user: UserInfo | None = None

    def validate(self) -> None:
        errs: list[FieldError] = []
        if self.orphan_dependents is not None and self.propagation_policy is not None:
            errs.append(
                errors.invalid(
                    "propagationPolicy",
                    self.propagation_policy,
                    "orphanDependents and deletionPropagation cannot be both set",
                )
            )
        if self.propagation_policy is not None and self.propagation_policy not in PROPAGATION_POLICIES:
            errs.append(
                errors.not_supported(
                    "propagationPolicy",
                    self.propagation_policy,
                    ["Foreground", "Background", "Orphan", "nil"],
                )
            )
        errs.extend(self._unsafe_delete_errors())
        if errs:
            raise errors.invalid_error("meta.k8s.io", "DeleteOptions", "", errs)

    def _unsafe_delete_errors(self) -> list[FieldError]:
        """The options an unsafe delete of a corrupt object may not be combined with (upstream's
        ValidateIgnoreStoreReadError)."""
        if not self.ignore_store_read_error:
            return []
        others = (
            (self.dry_run, ".dryRun"),
            (self.propagation_policy is not None, ".propagationPolicy"),
            (self.orphan_dependents is not None, ".orphanDependents"),
            (self.grace_period_seconds is not None, ".gracePeriodSeconds"),
            (
                self.preconditions.uid is not None or self.preconditions.resource_version is not None,
                ".preconditions",
            ),
        )
        return [
            errors.invalid(IGNORE_STORE_READ_ERROR, True, f"cannot be set together with {name}")
            for given, name in others
            if given
        ]


def delete_options_from_body(body: dict[str, Any] | None, base: DeleteOptions) -> DeleteOptions:
    """Merges a DeleteOptions body into query-derived options (the body wins where both are set)."""
    if not body:
        return base
    kind = body.get("kind")
    if kind not in (None, "", "DeleteOptions"):
        raise errors.bad_request(f'expected DeleteOptions, got kind "{kind}"')
    opts = DeleteOptions(
        dry_run=base.dry_run,
        grace_period_seconds=base.grace_period_seconds,
        propagation_policy=base.propagation_policy,
        preconditions=Preconditions(base.preconditions.uid, base.preconditions.resource_version),
        orphan_dependents=base.orphan_dependents,
        ignore_store_read_error=base.ignore_store_read_error,
        user=base.user,
    )
    grace = body.get("gracePeriodSeconds")
    if grace is not None:
        if not isinstance(grace, int) or isinstance(grace, bool):
            raise errors.bad_request("DeleteOptions.gracePeriodSeconds must be an integer")
        opts.grace_period_seconds = grace
    policy = body.get("propagationPolicy")
    if policy is not None:
        if not isinstance(policy, str):
            raise errors.bad_request("DeleteOptions.propagationPolicy must be a string")
        opts.propagation_policy = policy
    orphan = body.get("orphanDependents")
    if orphan is not None:
        if not isinstance(orphan, bool):
            raise errors.bad_request("DeleteOptions.orphanDependents must be a boolean")
        opts.orphan_dependents = orphan
    unsafe = body.get(IGNORE_STORE_READ_ERROR)
    if unsafe is not None:
        if not isinstance(unsafe, bool):
            raise errors.bad_request(f"DeleteOptions.{IGNORE_STORE_READ_ERROR} must be a boolean")
        opts.ignore_store_read_error = unsafe
    dry_run = body.get("dryRun")
    if dry_run is not None:
        opts.dry_run = parse_dry_run(dry_run if isinstance(dry_run, list) else [dry_run], "DeleteOptions")
    _merge_preconditions(body.get("preconditions"), opts.preconditions)
    return opts


def _merge_preconditions(body: Any, preconditions: Preconditions) -> None:
    """A DeleteOptions body's preconditions over the query's."""
    if body is None:
        return
    if not isinstance(body, dict):
        raise errors.bad_request("DeleteOptions.preconditions must be an object")
    if body.get("uid") is not None:
        preconditions.uid = str(body["uid"])
    if body.get("resourceVersion") is not None:
        preconditions.resource_version = str(body["resourceVersion"])


def dry_run_errors(values: list[Any]) -> list[FieldError]:
    """dryRun takes only "All" (repeatable). Upstream refuses the whole list, printed as Go prints
    a []string (`[]string{"All", "Maybe"}`)."""
    if all(value == DRY_RUN_ALL for value in values):
        return []
    listed = ", ".join(errors.go_quote(str(value)) for value in values)
    return [errors.not_supported("dryRun", errors.GoRepr(f"[]string{{{listed}}}"), [DRY_RUN_ALL])]


def parse_dry_run(values: list[Any], options_kind: str) -> bool:
    """dryRun takes only "All" (repeatable); anything else is 422 on the options kind, as upstream."""
    errs = dry_run_errors(values)
    if errs:
        raise errors.invalid_error("meta.k8s.io", options_kind, "", errs)
    return bool(values)
