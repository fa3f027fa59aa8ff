"""coreio's RBAC authorizer: the stored RoleBindings, resolved against a role source.

The rule evaluation is upstream's (plugin/pkg/auth/authorizer/rbac and pkg/apis/rbac/v1's
evaluation helpers): verbs, API groups, resources (`*`, `resource/subresource`, `*/subresource`),
resource names and non-resource URLs (`*` suffix). Only RoleBindings exist here (ClusterRoleBindings
are the cluster's business), so rules apply to requests in a binding's namespace; non-resource and
cluster-scoped requests are decided by others, except for the built-in system:masters, which gets what
upstream's cluster-admin ClusterRoleBinding gives it.

Subjects match as upstream: a User by name, a Group by membership, a ServiceAccount by the user name
`system:serviceaccount:<namespace>:<name>` (namespace defaulting to the binding's). Kinds are
qualified by API group: User and Group belong to rbac.authorization.core.io (our renamed twin of
rbac.authorization.k8s.io; an empty group counts as the default), ServiceAccount to the core group.

Part 7 of the interface makes three conditions errors the authorizer reports: a roleRef that cannot
be resolved, a subject kind it does not recognise, and a User or Group subject with a namespace. A
binding with any of them grants nothing (its other subjects and rules included), the others still
apply. Every condition of a binding is found, none hiding another (a bad subject does not keep its
roleRef from being resolved), and each goes to the `ProblemReporter` once per binding revision, from
where the server logs it, counts it and records a Warning Event for it
(`apiserver.rbac.bindings.ProblemRecorder`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from apiserver.auth.authz import Decision
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery.errors import aggregate_message, go_quote
from apiserver.machinery.types import JSON
from apiserver.machinery.user import MASTERS_GROUP, UserInfo
from apiserver.rbac.roles import (
    CLUSTER_ROLE_KIND,
    RBAC_API_GROUP,
    ROLE_KIND,
    PolicyRule,
    RoleSource,
    rule,
)
from apiserver.resources.rolebinding import GROUP, GROUP_KIND, SERVICE_ACCOUNT_KIND, USER_KIND

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
# What upstream's bootstrap ClusterRoleBinding cluster-admin grants system:masters.
CLUSTER_ADMIN_RULES = (rule(["*"], groups=["*"], resources=["*"]), rule(["*"], urls=["*"]))


# ----------------------------------------------------------------------------- rule matching


def verb_matches(policy: PolicyRule, verb: str) -> bool:
    return any(v == "*" or v == verb for v in policy.verbs)


def api_group_matches(policy: PolicyRule, group: str) -> bool:
    return any(g == "*" or g == group for g in policy.api_groups)


def resource_matches(policy: PolicyRule, combined: str, subresource: str) -> bool:
    """`combined` is `resource` or `resource/subresource`; a rule's `*/subresource` matches that
    subresource of any resource."""
    for candidate in policy.resources:
        if candidate == "*" or candidate == combined:
            return True
        if subresource and candidate == f"*/{subresource}":
            return True
    return False


def resource_name_matches(policy: PolicyRule, name: str) -> bool:
    return not policy.resource_names or name in policy.resource_names


def non_resource_url_matches(policy: PolicyRule, path: str) -> bool:
    for url in policy.non_resource_urls:
        if url == "*" or url == path:
            return True
        if url.endswith("*") and path.startswith(url.rstrip("*")):
            return True
    return False


def rule_allows(info: RequestInfo, policy: PolicyRule) -> bool:
    if info.is_resource_request:
        combined = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        return (
            verb_matches(policy, info.verb)
            and api_group_matches(policy, info.api_group)
            and resource_matches(policy, combined, info.subresource)
            and resource_name_matches(policy, info.name)
        )
    return verb_matches(policy, info.verb) and non_resource_url_matches(policy, info.path)


def rules_allow(info: RequestInfo, rules: Iterable[PolicyRule]) -> bool:
    return any(rule_allows(info, policy) for policy in rules)


# ----------------------------------------------------------------------------- bindings


def service_account_username(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


class ProblemReason(StrEnum):
    """The part-7 conditions, as the reasons of their Warning Events."""

    UNRESOLVABLE_ROLE_REF = "UnresolvableRoleRef"
    UNRECOGNIZED_SUBJECT_KIND = "UnrecognizedSubjectKind"
    NAMESPACED_SUBJECT = "NamespacedSubject"


@dataclass(frozen=True)
class BindingProblem:
    """One part-7 condition of one revision of one RoleBinding."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    reason: ProblemReason
    message: str

    def __str__(self) -> str:
        return f"RoleBinding {go_quote(self.namespace + '/' + self.name)}: {self.message}"


@dataclass(frozen=True)
class Subject:
    kind: str
    name: str
    api_group: str = ""
    namespace: str = ""

    def describe(self, binding_namespace: str) -> str:
        """As upstream's describeSubject: `User "alice"`, `ServiceAccount "sa/ns"`."""
        if self.kind == SERVICE_ACCOUNT_KIND:
            return f"{self.kind} {go_quote(self.name + '/' + (self.namespace or binding_namespace))}"
        return f"{self.kind} {go_quote(self.name)}"

    def recognized(self) -> bool:
        if self.kind in (USER_KIND, GROUP_KIND):
            return self.api_group in ("", GROUP)
        return self.kind == SERVICE_ACCOUNT_KIND and self.api_group == ""

    def applies_to(self, user: UserInfo, binding_namespace: str) -> bool:
        """appliesToUser; an unrecognized kind applies to no one."""
        if not self.recognized():
            return False
        if self.kind == USER_KIND:
            return user.name == self.name
        if self.kind == GROUP_KIND:
            return self.name in user.groups
        namespace = self.namespace or binding_namespace
        return bool(namespace) and user.name == service_account_username(namespace, self.name)


@dataclass(frozen=True)
class RoleRef:
    api_group: str
    kind: str
    name: str


def _s(obj: Any, key: str) -> str:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Binding:
    """A stored RoleBinding as the authorizer uses it, with the problems found in it on its own
    (the roleRef's resolution depends on the role source and is checked when used)."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    role_ref: RoleRef
    subjects: tuple[Subject, ...]
    problems: tuple[BindingProblem, ...] = ()

    @classmethod
    def from_object(cls, obj: JSON) -> Binding:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        namespace, name = _s(meta, "namespace"), _s(meta, "name")
        uid, version = _s(meta, "uid"), _s(meta, "resourceVersion")
        raw_ref = obj.get("roleRef")
        role_ref = RoleRef(_s(raw_ref, "apiGroup"), _s(raw_ref, "kind"), _s(raw_ref, "name"))
        raw_subjects = obj.get("subjects")
        subjects = tuple(
            Subject(_s(s, "kind"), _s(s, "name"), _s(s, "apiGroup"), _s(s, "namespace"))
            for s in (raw_subjects if isinstance(raw_subjects, list) else [])
        )

        def problem(reason: ProblemReason, message: str) -> BindingProblem:
            return BindingProblem(namespace, name, uid, version, reason, message)

        problems: list[BindingProblem] = []
        if not role_ref_supported(role_ref):
            problems.append(problem(ProblemReason.UNRESOLVABLE_ROLE_REF, unsupported_role_ref(role_ref)))
        for index, subject in enumerate(subjects):
            if not subject.recognized():
                kind = go_quote(subject.kind)
                where = f" in API group {go_quote(subject.api_group)}" if subject.api_group else ""
                problems.append(
                    problem(
                        ProblemReason.UNRECOGNIZED_SUBJECT_KIND,
                        f"subjects[{index}]: unrecognized subject kind {kind}{where}",
                    )
                )
            elif subject.kind in (USER_KIND, GROUP_KIND) and subject.namespace:
                problems.append(
                    problem(
                        ProblemReason.NAMESPACED_SUBJECT,
                        f"subjects[{index}]: {subject.kind} {go_quote(subject.name)} is not namespaced, "
                        f"but namespace is {go_quote(subject.namespace)}",
                    )
                )
        return cls(namespace, name, uid, version, role_ref, subjects, tuple(problems))

    def subject_for(self, user: UserInfo) -> Subject | None:
        """The first subject that applies to `user` (upstream's appliesTo)."""
        return next((s for s in self.subjects if s.applies_to(user, self.namespace)), None)

    def describe(self, subject: Subject) -> str:
        """As upstream's roleBindingDescriber:
        `RoleBinding "name/ns" of ClusterRole "edit" to User "alice"`."""
        return (
            f"RoleBinding {go_quote(self.name + '/' + self.namespace)} of {self.role_ref.kind} "
            f"{go_quote(self.role_ref.name)} to {subject.describe(self.namespace)}"
        )

    def problem(self, reason: ProblemReason, message: str) -> BindingProblem:
        return BindingProblem(self.namespace, self.name, self.uid, self.resource_version, reason, message)


def role_ref_supported(ref: RoleRef) -> bool:
    """A Role or ClusterRole of our group (or the default one): what a role source can resolve."""
    return ref.api_group in ("", GROUP) and ref.kind in (ROLE_KIND, CLUSTER_ROLE_KIND)


def unsupported_role_ref(ref: RoleRef) -> str:
    if ref.kind not in (ROLE_KIND, CLUSTER_ROLE_KIND):
        return f"unsupported role reference kind: {go_quote(ref.kind)}"
    return f"unsupported role reference API group: {go_quote(ref.api_group)}"


class BindingLister(Protocol):
    """The RoleBindings of a namespace, from memory (`apiserver.rbac.bindings.BindingIndex`)."""

    def role_bindings(self, namespace: str) -> Sequence[Binding]: ...


# ----------------------------------------------------------------------------- problem reporting

ProblemHook = Callable[[BindingProblem], None]


class ProblemReporter:
    """Hands each part-7 problem to the hooks once per binding revision (a binding updated to a new
    resourceVersion that is still broken is reported again). Hooks run synchronously and must not
    block; a failing hook is logged and does not disturb authorization."""

    def __init__(self, hooks: Iterable[ProblemHook] = ()) -> None:
        self.hooks = list(hooks)
        self._seen: dict[tuple[str, str], set[tuple[str, str, str]]] = {}

    def report(self, problem: BindingProblem) -> bool:
        """True when the problem was new (and went to the hooks)."""
        key = (problem.namespace, problem.name)
        entry = (problem.resource_version, problem.reason.value, problem.message)
        seen = self._seen.setdefault(key, set())
        if entry in seen:
            return False
        # Only the current revision's problems are remembered.
        for old in [e for e in seen if e[0] != problem.resource_version]:
            seen.discard(old)
        seen.add(entry)
        for hook in self.hooks:
            try:
                hook(problem)
            except Exception:
                log.exception("binding problem hook failed for %s", problem)
        return True

    def forget(self, namespace: str, name: str) -> None:
        """The binding is gone: a new one of that name starts afresh."""
        self._seen.pop((namespace, name), None)


# ----------------------------------------------------------------------------- the authorizer


class RoleRefError(Exception):
    """A roleRef that does not resolve. `not_found` tells a missing role from a malformed ref."""

    def __init__(self, message: str, *, not_found: bool, kind: str = "", name: str = "") -> None:
        super().__init__(message)
        self.not_found = not_found
        self.kind = kind
        self.name = name


class BindingProblemError(Exception):
    """A binding that grants nothing because of its own part-7 problems."""

    def __init__(self, problems: Sequence[BindingProblem]) -> None:
        super().__init__(aggregate_message([p.message for p in problems]))
        self.problems = tuple(problems)


class RolesNotReady(Exception):
    """The role source has not completed its first sync; no roleRef can be judged yet."""


@dataclass(frozen=True)
class Resolution:
    """A binding's rules; or, when `error` says why, nothing: its problems, or roles not yet synced."""

    rules: tuple[PolicyRule, ...] = ()
    problems: tuple[BindingProblem, ...] = ()
    error: str = ""


# visitor(source description or None, rule or None, error message or None) -> keep going?
RuleVisitor = Callable[[str | None, PolicyRule | None, str | None], bool]


@dataclass
class _Verdict:
    info: RequestInfo
    allowed: bool = False
    reason: str = ""
    errors: list[str] = field(default_factory=list)

    def visit(self, source: str | None, policy: PolicyRule | None, error: str | None) -> bool:
        if policy is not None and rule_allows(self.info, policy):
            self.allowed = True
            self.reason = f"RBAC: allowed by {source}"
            return False
        if error is not None:
            self.errors.append(error)
        return True


class RBACAuthorizer:
    """Decides from the RoleBindings of the request's namespace (plus system:masters).

    Never denies outright (RBAC has no deny rules): a request no rule allows is "no opinion"
    (`Decision(False, reason)`), the reason naming resolution errors as upstream's
    `RBAC: [...]`.
    """

    def __init__(
        self,
        bindings: BindingLister,
        roles: RoleSource,
        *,
        reporter: ProblemReporter | None = None,
        privileged_groups: tuple[str, ...] = (MASTERS_GROUP,),
    ) -> None:
        self.bindings = bindings
        self.roles = roles
        self.reporter = reporter
        self.privileged_groups = frozenset(privileged_groups)

    # -- roleRef resolution

    def role_ref_rules(self, ref: RoleRef, namespace: str) -> tuple[PolicyRule, ...]:
        """The rules a roleRef names in a binding of `namespace` (upstream's GetRoleReferenceRules),
        with upstream's lister wording for a missing role, e.g.
        `clusterrole.rbac.authorization.k8s.io "x" not found`."""
        if not role_ref_supported(ref):
            raise RoleRefError(unsupported_role_ref(ref), not_found=False)
        if not self.roles.ready:
            raise RolesNotReady("roles are not synced yet")
        if ref.kind == ROLE_KIND:
            role = self.roles.get_role(namespace, ref.name)
        else:
            role = self.roles.get_cluster_role(ref.name)
        if role is None:
            message = f"{ref.kind.lower()}.{RBAC_API_GROUP} {go_quote(ref.name)} not found"
            raise RoleRefError(message, not_found=True, kind=ref.kind, name=ref.name)
        return role.rules

    def binding_rules(self, binding: Binding) -> tuple[PolicyRule, ...]:
        """The rules of a binding. Every problem it has is reported, its own and its roleRef's
        resolution alike, so that none hides another. A roleRef that alone fails to resolve raises
        its `RoleRefError` (upstream's wording); any other problem raises `BindingProblemError`
        naming them all. `RolesNotReady` passes through unreported when nothing else is wrong."""
        problems = list(binding.problems)
        rules: tuple[PolicyRule, ...] = ()
        unresolved: RoleRefError | None = None
        try:
            rules = self._role_ref_rules(binding)
        except RoleRefError as exc:
            unresolved = exc
            problems.insert(0, binding.problem(ProblemReason.UNRESOLVABLE_ROLE_REF, str(exc)))
        except RolesNotReady:
            # The roleRef waits for the roles' first sync (which re-checks every binding); the
            # binding's own problems need no roles and are reported now.
            if not problems:
                raise
        for problem in problems:
            self._report(problem)
        if unresolved is not None and len(problems) == 1:
            raise unresolved
        if problems:
            raise BindingProblemError(problems)
        return rules

    def _role_ref_rules(self, binding: Binding) -> tuple[PolicyRule, ...]:
        # An unsupported roleRef is already one of the binding's own problems: resolving it would
        # only name it a second time.
        if not role_ref_supported(binding.role_ref):
            return ()
        return self.role_ref_rules(binding.role_ref, binding.namespace)

    def resolve(self, binding: Binding) -> Resolution:
        """What the binding grants, or why it grants nothing (its problems reported, as by
        `binding_rules`)."""
        try:
            return Resolution(self.binding_rules(binding))
        except BindingProblemError as exc:
            return Resolution(problems=exc.problems, error=str(exc))
        except RoleRefError as exc:
            problem = binding.problem(ProblemReason.UNRESOLVABLE_ROLE_REF, str(exc))
            return Resolution(problems=(problem,), error=str(exc))
        except RolesNotReady as exc:
            return Resolution(error=str(exc))

    def check_binding(self, binding: Binding) -> None:
        """Reports the binding's problems, resolution included (for an index to call on changes)."""
        self.resolve(binding)

    def _report(self, problem: BindingProblem) -> None:
        if self.reporter is not None:
            self.reporter.report(problem)

    # -- rules of a user

    def visit_rules_for(self, user: UserInfo, namespace: str, visitor: RuleVisitor) -> None:
        """Each rule that applies to `user` in `namespace`, with where it comes from, and each
        error met on the way (upstream's VisitRulesFor; visiting stops when `visitor` says so)."""
        masters = self.privileged_groups.intersection(user.groups)
        if masters:
            group = sorted(masters)[0]
            source = (
                'ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to '
                f"Group {go_quote(group)}"
            )
            if not all(visitor(source, policy, None) for policy in CLUSTER_ADMIN_RULES):
                return
        if not namespace:
            return
        for binding in self.bindings.role_bindings(namespace):
            subject = binding.subject_for(user)
            if subject is not None and not self._visit_binding(binding, subject, visitor):
                return

    def _visit_binding(self, binding: Binding, subject: Subject, visitor: RuleVisitor) -> bool:
        """The rules one binding grants `subject`, or its error; False once `visitor` says stop."""
        try:
            rules = self.binding_rules(binding)
        except BindingProblemError as exc:
            return visitor(None, None, f"{binding.describe(subject)}: {exc}")
        except (RoleRefError, RolesNotReady) as exc:
            return visitor(None, None, str(exc))
        source = binding.describe(subject)
        return all(visitor(source, policy, None) for policy in rules)

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[PolicyRule], list[str]]:
        """Every rule that applies, and the resolution errors (upstream's RulesFor)."""
        rules: list[PolicyRule] = []
        errors: list[str] = []

        def collect(_source: str | None, policy: PolicyRule | None, error: str | None) -> bool:
            if policy is not None:
                rules.append(policy)
            if error is not None:
                errors.append(error)
            return True

        self.visit_rules_for(user, namespace, collect)
        return rules, errors

    # -- decisions

    def evaluate(self, user: UserInfo, info: RequestInfo) -> Decision:
        verdict = _Verdict(info)
        self.visit_rules_for(user, info.namespace, verdict.visit)
        if verdict.allowed:
            return Decision(True, verdict.reason)
        reason = f"RBAC: {aggregate_message(verdict.errors)}" if verdict.errors else ""
        return Decision(False, reason)

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        return self.evaluate(user, info)
