"""The Installation's status: conditions as metav1.Condition, each keeping its
lastTransitionTime while its status stays the same (as upstream's meta.SetStatusCondition)."""

from __future__ import annotations

import datetime

from apiserver.machinery.types import JSON
from apiserver_operator.reconcile import Outcome, Refused


def rfc3339(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: list[JSON],
    kind: str,
    status: str,
    reason: str,
    message: str,
    *,
    now: datetime.datetime,
    generation: int,
) -> list[JSON]:
    previous: JSON = next((c for c in conditions if c.get("type") == kind), {})
    since = rfc3339(now)
    if previous.get("status") == status:
        since = str(previous.get("lastTransitionTime", since))
    condition = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }
    return [c for c in conditions if c.get("type") != kind] + [condition]


def _certificates_condition(outcome: Outcome, now: datetime.datetime) -> tuple[str, str, str]:
    plan = outcome.certificates
    if plan is None:
        return "Unknown", "NotIssued", "no certificates yet"
    valid = plan.ca_not_after > now and plan.serving_not_after > now
    message = f"CA valid until {rfc3339(plan.ca_not_after)}, serving until {rfc3339(plan.serving_not_after)}"
    return ("True", "Valid", message) if valid else ("False", "Expired", message)


def reconciled(body: JSON, outcome: Outcome, now: datetime.datetime) -> JSON:
    """The status patch after a successful reconciliation."""
    generation = int(body.get("metadata", {}).get("generation", 0))
    conditions: list[JSON] = list(body.get("status", {}).get("conditions", []))
    conditions = set_condition(
        conditions, "Ready", "True", "Reconciled", "every child is in place", now=now, generation=generation
    )
    conditions = set_condition(conditions, "Available", *outcome.available, now=now, generation=generation)
    conditions = set_condition(
        conditions,
        "CertificatesValid",
        *_certificates_condition(outcome, now),
        now=now,
        generation=generation,
    )
    patch: JSON = {"observedGeneration": generation, "conditions": conditions}
    if outcome.certificates is not None:
        patch["certificates"] = outcome.certificates.status()
    return patch


def refused(body: JSON, refusal: Refused, now: datetime.datetime) -> JSON:
    generation = int(body.get("metadata", {}).get("generation", 0))
    conditions: list[JSON] = list(body.get("status", {}).get("conditions", []))
    conditions = set_condition(
        conditions, "Ready", "False", refusal.reason, refusal.message, now=now, generation=generation
    )
    return {"observedGeneration": generation, "conditions": conditions}


def failed(body: JSON, error: Exception, now: datetime.datetime) -> JSON:
    generation = int(body.get("metadata", {}).get("generation", 0))
    conditions: list[JSON] = list(body.get("status", {}).get("conditions", []))
    conditions = set_condition(
        conditions, "Ready", "False", "ReconcileError", str(error)[:1000], now=now, generation=generation
    )
    return {"conditions": conditions}
