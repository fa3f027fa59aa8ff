"""The escalation guard on RoleBinding writes, as upstream's (pkg/registry/rbac/escalation_check.go,
the rolebinding policybased storage, and validation.Covers / ConfirmNoEscalation).

Creating or updating a RoleBinding is allowed when the caller

1. is in system:masters, or
2. may `bind` the referenced role: verb `bind` on `roles` or `clusterroles` named as the roleRef, in
   the binding's namespace, in API group rbac.authorization.k8s.io, asked of the whole authorizer
   chain (so the cluster's RBAC counts, through the delegated SubjectAccessReview), or
3. already holds every rule of the role in that namespace: the rules coreio's own RoleBindings give
   them there (upstream's covers check), and, with a delegate, whatever the delegate (the cluster)
   allows them, asked one broken-down rule at a time.

Why rbac.authorization.k8s.io for `bind` (upstream asks in the roleRef's group): the roles a coreio
roleRef names *are* rbac.authorization.k8s.io Roles and ClusterRoles (the cluster's, or the role
source's), so the authority to bind them is the one cluster admins already grant with
`verbs: [bind]` on `roles`/`clusterroles` there; rbac.authorization.core.io has no role resources.

An update that only touches what garbage collection needs (finalizers, ownerReferences) is not
checked, as upstream. Otherwise the answer is upstream's 403, e.g.
`rolebindings.rbac.authorization.core.io "x" is forbidden: user "alice" (groups=["devs"
"system:authenticated"]) is attempting to grant RBAC permissions not currently held:` followed by the
missing rules, one a line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from apiserver.auth.attributes import non_resource_attributes, resource_attributes
from apiserver.auth.authz import Authorizer
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery import errors
from apiserver.machinery.errors import GroupResource, go_quote
from apiserver.machinery.types import JSON
from apiserver.machinery.user import MASTERS_GROUP, UserInfo
from apiserver.rbac.authorizer import RBACAuthorizer, RoleRef, RoleRefError, RolesNotReady
from apiserver.rbac.roles import CLUSTER_ROLE_KIND, RBAC_API_GROUP, ROLE_KIND, PolicyRule
from apiserver.resources.rolebinding import GROUP

log = logging.getLogger(__name__)

ROLE_BINDINGS = GroupResource(GROUP, "rolebindings")
BIND_API_GROUP = RBAC_API_GROUP
# How many broken-down rules are asked of the delegate at once.
DELEGATE_CONCURRENCY = 16
# Metadata the garbage collector changes; an update touching nothing else is not checked.
_GC_FIELDS = ("finalizers", "ownerReferences")
# Metadata the server maintains (whether or not the caller sent it back).
_SERVER_FIELDS = (
    "resourceVersion",
    "managedFields",
    "generation",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)


# ----------------------------------------------------------------------------- covers


def breakdown_rule(policy: PolicyRule) -> list[PolicyRule]:
    """One rule per (group, resource, verb[, resourceName]) and per (nonResourceURL, verb)."""
    parts: list[PolicyRule] = []
    for group in policy.api_groups:
        for resource in policy.resources:
            for verb in policy.verbs:
                if policy.resource_names:
                    parts += [
                        PolicyRule(
                            verbs=(verb,), api_groups=(group,), resources=(resource,), resource_names=(n,)
                        )
                        for n in policy.resource_names
                    ]
                else:
                    parts.append(PolicyRule(verbs=(verb,), api_groups=(group,), resources=(resource,)))
    for url in policy.non_resource_urls:
        parts += [PolicyRule(verbs=(verb,), non_resource_urls=(url,)) for verb in policy.verbs]
    return parts


def _resources_cover(owned: Sequence[str], wanted: Sequence[str]) -> bool:
    if "*" in owned:
        return True
    for resource in wanted:
        if resource in owned:
            continue
        if "/" not in resource:
            return False
        if "*/" + resource.split("/", 1)[1] not in owned:
            return False
    return True


def _url_covers(owned: str, wanted: str) -> bool:
    return owned == wanted or (owned.endswith("*") and wanted.startswith(owned.rstrip("*")))


def rule_covers(owner: PolicyRule, part: PolicyRule) -> bool:
    """Whether `owner` allows all of `part` (a rule with at most one verb, resource and name)."""
    verbs = "*" in owner.verbs or set(part.verbs) <= set(owner.verbs)
    groups = "*" in owner.api_groups or set(part.api_groups) <= set(owner.api_groups)
    resources = _resources_cover(owner.resources, part.resources)
    urls = all(any(_url_covers(o, w) for o in owner.non_resource_urls) for w in part.non_resource_urls)
    if not part.resource_names:
        names = not owner.resource_names
    else:
        names = not owner.resource_names or set(part.resource_names) <= set(owner.resource_names)
    return verbs and groups and resources and names and urls


def covers(owner_rules: Sequence[PolicyRule], rules: Sequence[PolicyRule]) -> tuple[bool, list[PolicyRule]]:
    """Whether `owner_rules` allow everything `rules` do, and the broken-down rules they miss."""
    missing = [
        part
        for policy in rules
        for part in breakdown_rule(policy)
        if not any(rule_covers(owner, part) for owner in owner_rules)
    ]
    return not missing, missing


def compact_rules(rules: Sequence[PolicyRule]) -> list[PolicyRule]:
    """Merges the verbs of rules naming one group, one resource and at most one resourceName (the
    shape `breakdown_rule` produces), as upstream does before printing what is missing."""
    compacted: list[PolicyRule] = []
    simple: dict[tuple[str, str, tuple[str, ...]], PolicyRule] = {}
    for policy in rules:
        is_simple = (
            len(policy.api_groups) == 1
            and len(policy.resources) == 1
            and len(policy.resource_names) <= 1
            and not policy.non_resource_urls
        )
        if not is_simple:
            compacted.append(policy)
            continue
        key = (policy.api_groups[0], policy.resources[0], policy.resource_names)
        merged = simple.get(key)
        simple[key] = (
            policy
            if merged is None
            else PolicyRule(
                verbs=merged.verbs + policy.verbs,
                api_groups=merged.api_groups,
                resources=merged.resources,
                resource_names=merged.resource_names,
            )
        )
    return compacted + list(simple.values())


def escalation_message(
    user: UserInfo, missing: Sequence[PolicyRule], resolution_errors: Sequence[str]
) -> str:
    """ConfirmNoEscalation's message (sorted, unique rule lines)."""
    groups = "[" + " ".join(go_quote(g) for g in user.groups) + "]"
    lines = sorted({policy.compact_string() for policy in compact_rules(missing)})
    message = (
        f"user {go_quote(user.name)} (groups={groups}) is attempting to grant RBAC permissions not "
        "currently held:\n" + "\n".join(lines)
    )
    if resolution_errors:
        message += f"; resolution errors: [{errors.aggregate_message(list(resolution_errors))}]"
    return message


def rule_attributes(part: PolicyRule, namespace: str) -> RequestInfo:
    """A broken-down rule as the request it stands for (wildcards stay literal: a `*` verb is only
    allowed by a `*` rule, which is exactly what holding it means)."""
    if part.non_resource_urls:
        return non_resource_attributes(part.verbs[0], part.non_resource_urls[0])
    resource, _, subresource = part.resources[0].partition("/")
    return resource_attributes(
        part.verbs[0],
        api_group=part.api_groups[0],
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=part.resource_names[0] if part.resource_names else "",
    )


# ----------------------------------------------------------------------------- the guard


def _s(obj: Any, key: str) -> str:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def only_gc_fields_changed(new: JSON, old: JSON) -> bool:
    """upstream's IsOnlyMutatingGCFields (ignoring what the server itself maintains)."""

    def strip(obj: JSON) -> JSON:
        meta = dict(obj.get("metadata") or {})
        for key in _GC_FIELDS + _SERVER_FIELDS:
            meta.pop(key, None)
        return {**obj, "metadata": meta}

    return strip(new) == strip(old)


class EscalationGuard:
    """Checks RoleBinding creates and updates (see the module's docstring).

    `authorizer` is the server's whole chain (used for `bind`); `delegate`, when given, is asked
    about the rules coreio's own bindings do not cover (in a cluster: the SubjectAccessReview
    authorizer, so that what the cluster lets the caller do counts as held)."""

    def __init__(
        self,
        rbac: RBACAuthorizer,
        authorizer: Authorizer,
        *,
        delegate: Authorizer | None = None,
        privileged_groups: tuple[str, ...] = (MASTERS_GROUP,),
    ) -> None:
        self.rbac = rbac
        self.authorizer = authorizer
        self.delegate = delegate
        self.privileged_groups = frozenset(privileged_groups)

    async def admit(self, user: UserInfo | None, namespace: str, obj: JSON, old: JSON | None = None) -> None:
        """Raises the 403 (or 404 for a missing role) that stops the write; returns to allow it.

        Call it with the object about to be stored (after decoding, before validation, as upstream
        runs it ahead of the strategy) and, for an update, the stored object."""
        if user is None or self.privileged_groups.intersection(user.groups):
            # Upstream: no user means no authentication configured; masters may do anything.
            return
        if old is not None and only_gc_fields_changed(obj, old):
            return
        raw_ref = obj.get("roleRef")
        ref = RoleRef(_s(raw_ref, "apiGroup"), _s(raw_ref, "kind"), _s(raw_ref, "name"))
        if ref.kind not in (ROLE_KIND, CLUSTER_ROLE_KIND) or not ref.name:
            return  # validation answers for a malformed roleRef (422)
        name = _s(obj.get("metadata"), "name")
        if await self.may_bind(user, ref, namespace):
            return
        try:
            rules = self.rbac.role_ref_rules(ref, namespace)
        except RolesNotReady as exc:
            raise errors.service_unavailable(f"authorization is not ready: {exc}") from exc
        except RoleRefError as exc:
            if exc.not_found:
                # As upstream (its rule resolver reads the role through the registry).
                plural = "clusterroles" if ref.kind == CLUSTER_ROLE_KIND else "roles"
                raise errors.not_found_error(GroupResource(RBAC_API_GROUP, plural), ref.name) from exc
            return
        owner_rules, resolution_errors = self.rbac.rules_for(user, namespace)
        held, missing = covers(owner_rules, rules)
        if not held and self.delegate is not None:
            missing = await self._not_delegated(user, namespace, missing)
        if missing:
            message = escalation_message(user, missing, resolution_errors)
            raise errors.forbidden_error(ROLE_BINDINGS, name, message)

    async def may_bind(self, user: UserInfo, ref: RoleRef, namespace: str) -> bool:
        """BindingAuthorized: may `user` bind the role `ref` names in `namespace`?"""
        info = resource_attributes(
            "bind",
            api_group=BIND_API_GROUP,
            resource="clusterroles" if ref.kind == CLUSTER_ROLE_KIND else "roles",
            namespace=namespace,
            name=ref.name,
        )
        try:
            return (await self.authorizer.authorize(user, info)).allowed
        except errors.StatusError as exc:
            log.warning(
                "could not check bind of %s %s for %s: %s", ref.kind, ref.name, user.name, exc.message
            )
            return False

    async def _not_delegated(
        self, user: UserInfo, namespace: str, parts: list[PolicyRule]
    ) -> list[PolicyRule]:
        assert self.delegate is not None
        delegate = self.delegate
        limit = asyncio.Semaphore(DELEGATE_CONCURRENCY)

        async def held(part: PolicyRule) -> bool:
            async with limit:
                try:
                    return (await delegate.authorize(user, rule_attributes(part, namespace))).allowed
                except errors.StatusError:
                    return False

        answers = await asyncio.gather(*(held(part) for part in parts))
        return [part for part, ok in zip(parts, answers, strict=True) if not ok]
