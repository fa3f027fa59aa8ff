"""The admission chain of one kind's writes, in upstream's order: namespace lifecycle, the mutating
plugins (admission policies, webhooks), the kind's own checks (the RoleBinding escalation guard,
which upstream's storage makes after mutation), then, once the registry has validated the object,
the validating plugins."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from apiserver.admission.request import DELETE, AdmissionRequest
from apiserver.machinery.types import JSON
from apiserver.resources.base import Admission


class MutatingAdmission(Protocol):
    async def admit(self, request: AdmissionRequest) -> JSON | None:
        """The object as this plugin changes it (None: unchanged); refuses with a StatusError."""
        ...


class ValidatingAdmission(Protocol):
    async def validate(self, request: AdmissionRequest) -> None:
        """Refuses the request with a StatusError, or lets it pass (noting warnings and audit
        annotations in the request's notes)."""
        ...


@dataclass
class AdmissionChain:
    namespace: Admission | None = None
    mutating: Sequence[MutatingAdmission] = ()
    kind_checks: Admission | None = None
    validating: Sequence[ValidatingAdmission] = ()

    async def admit(self, request: AdmissionRequest) -> JSON | None:
        """The mutating phase: the object to validate and store (None for a delete)."""
        obj, old = request.obj, request.old
        if request.operation != DELETE and self.namespace is not None and obj is not None:
            await self.namespace(request.user, request.namespace, obj, old)
        for plugin in self.mutating:
            changed = await plugin.admit(request)
            if changed is not None:
                request = request.with_object(changed)
        obj = request.obj
        if request.operation != DELETE and self.kind_checks is not None and obj is not None:
            await self.kind_checks(request.user, request.namespace, obj, old)
        return obj

    async def validate(self, request: AdmissionRequest) -> None:
        """The validating phase, on the object as it will be stored."""
        for plugin in self.validating:
            await plugin.validate(request)
