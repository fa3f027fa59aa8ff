"""Why a user may or may not make a request (the logic of `kubectl coreio why`): each step of the
server's authorizer chain for that user, with its own decision, in the chain's order:

1. the privileged groups (system:masters),
2. standalone, the default ClusterRoleBindings held in code,
3. in a cluster, the delegated SubjectAccessReview (the cluster's own answer for that user),
4. each RoleBinding of the namespace that names the user or one of its groups: the rule that
   allows, or that none does, or the problems for which the binding grants nothing.

The chain allows when any step does. RoleBindings that do not name the user are only counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from apiserver.auth.authz import Authorizer
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery import errors
from apiserver.machinery.errors import go_quote
from apiserver.machinery.user import UserInfo
from apiserver.rbac.authorizer import (
    Binding,
    BindingProblem,
    RBACAuthorizer,
    Subject,
    service_account_username,
)
from apiserver.rbac.chain import BootstrapDiscovery
from apiserver.rbac.roles import PolicyRule
from apiserver.rbac.whocan import first_allowing
from apiserver.resources.rolebinding import SERVICE_ACCOUNT_KIND


class Verdict(StrEnum):
    ALLOW = "Allow"
    NO_OPINION = "NoOpinion"
    ERROR = "Error"


class Step(StrEnum):
    """The authorizers of the chain, as an explanation names them."""

    PRIVILEGED = "PrivilegedGroups"
    DEFAULTS = "DefaultClusterRoleBindings"
    DELEGATED = "SubjectAccessReview"
    RBAC = "RBAC"


@dataclass(frozen=True)
class Decision:
    """One step's decision, and for a RoleBinding: the subject naming the user, the rule that
    allows, the problems for which it grants nothing."""

    step: Step
    verdict: Verdict
    reason: str
    binding: Binding | None = None
    subject: Subject | None = None
    rule: PolicyRule | None = None
    problems: tuple[BindingProblem, ...] = ()


@dataclass
class Explanation:
    decisions: list[Decision] = field(default_factory=list)
    # RoleBindings of the namespace that name neither the user nor any of its groups.
    other_bindings: int = 0

    @property
    def allowed(self) -> bool:
        return any(d.verdict == Verdict.ALLOW for d in self.decisions)

    @property
    def reason(self) -> str:
        """The first allowing step's reason, as the chain answers."""
        return next((d.reason for d in self.decisions if d.verdict == Verdict.ALLOW), "")

    @property
    def evaluation_error(self) -> str:
        found = [d.reason for d in self.decisions if d.verdict == Verdict.ERROR]
        return errors.aggregate_message(found) if found else ""


async def explain(
    rbac: RBACAuthorizer,
    user: UserInfo,
    info: RequestInfo,
    *,
    defaults: bool = False,
    delegate: Authorizer | None = None,
) -> Explanation:
    """Every step's decision on `info` for `user`, none cut short by another's. `defaults`: the
    chain holds the default ClusterRoleBindings (standalone); `delegate`: it asks the cluster."""
    found = Explanation([_privileged(rbac, user)])
    if defaults:
        default = BootstrapDiscovery.decide(user, info)
        reason = default.reason or "no default ClusterRoleBinding allows it"
        found.decisions.append(Decision(Step.DEFAULTS, _verdict(default.allowed), reason))
    if delegate is not None:
        found.decisions.append(await _delegated(delegate, user, info))
    for binding in sorted(rbac.bindings.role_bindings(info.namespace), key=lambda b: b.name):
        decision = _role_binding(rbac, binding, user, info)
        if decision is None:
            found.other_bindings += 1
        else:
            found.decisions.append(decision)
    return found


def _verdict(allowed: bool) -> Verdict:
    return Verdict.ALLOW if allowed else Verdict.NO_OPINION


def _privileged(rbac: RBACAuthorizer, user: UserInfo) -> Decision:
    groups = sorted(rbac.privileged_groups)
    held = [group for group in groups if group in user.groups]
    if held:
        return Decision(
            Step.PRIVILEGED, Verdict.ALLOW, f"in group {go_quote(held[0])}, which may do anything"
        )
    return Decision(Step.PRIVILEGED, Verdict.NO_OPINION, f"not in {_either(groups)}")


def _either(groups: Iterable[str]) -> str:
    return " or ".join(f"group {go_quote(g)}" for g in groups) or "a privileged group"


async def _delegated(delegate: Authorizer, user: UserInfo, info: RequestInfo) -> Decision:
    try:
        decision = await delegate.authorize(user, info)
    except errors.StatusError as exc:
        return Decision(Step.DELEGATED, Verdict.ERROR, f"the cluster could not be asked: {exc.message}")
    reason = decision.reason or (
        "allowed by the cluster" if decision.allowed else "the cluster does not allow it"
    )
    return Decision(Step.DELEGATED, _verdict(decision.allowed), reason)


def _role_binding(
    rbac: RBACAuthorizer, binding: Binding, user: UserInfo, info: RequestInfo
) -> Decision | None:
    """The binding's decision, or None when it names neither the user nor its groups."""
    subject = binding.subject_for(user)
    named = subject or next((s for s in binding.subjects if _names(s, user, binding.namespace)), None)
    if named is None:
        return None
    resolved = rbac.resolve(binding)
    if resolved.error:
        reason = f"grants nothing: {resolved.error}"
        return Decision(Step.RBAC, Verdict.ERROR, reason, binding, named, problems=resolved.problems)
    if subject is None:
        reason = f"{named.describe(binding.namespace)} is not this user: no subject applies"
        return Decision(Step.RBAC, Verdict.NO_OPINION, reason, binding, named)
    allowing = first_allowing(info, resolved.rules)
    if allowing is None:
        role = f"{binding.role_ref.kind} {go_quote(binding.role_ref.name)}"
        return Decision(Step.RBAC, Verdict.NO_OPINION, f"no rule of {role} allows it", binding, subject)
    reason = f"RBAC: allowed by {binding.describe(subject)}"
    return Decision(Step.RBAC, Verdict.ALLOW, reason, binding, subject, allowing)


def _names(subject: Subject, user: UserInfo, namespace: str) -> bool:
    """Whether the subject names the user or one of its groups, whatever its kind (a subject of
    the wrong kind, API group or namespace is the mistake an explanation must show)."""
    if subject.name == user.name or subject.name in user.groups:
        return True
    if subject.kind == SERVICE_ACCOUNT_KIND:
        return service_account_username(subject.namespace or namespace, subject.name) == user.name
    return False
