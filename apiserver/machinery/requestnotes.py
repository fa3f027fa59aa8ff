"""What a request's handling says besides its answer: warnings for the client and annotations for
its audit event, as upstream's request context carries them (`warning.AddWarning`,
`audit.AddAuditAnnotation`).

Deep layers (admission, the registry) add to the notes of the request being handled without knowing
of HTTP; the HTTP layer writes the warnings as `Warning` headers on any answer, error or not, and
the annotations into the request's audit event.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

# The audit levels (apiserver.audit.policy.Level) an annotation may ask for.
REQUEST_LEVEL = 2


@dataclass
class RequestNotes:
    warnings: list[str] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    # The level of the request's audit event (0: none), for annotations kept only from a level on.
    audit_level: int = 0

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    def annotate(self, key: str, value: str, level: int = 0) -> None:
        """As upstream, the first value given for a key stays; `level`: the audit level from
        which it is kept (upstream's AddAnnotationWithLevel)."""
        if self.audit_level >= level:
            self.annotations.setdefault(key, value)


# Set in the request's own task, so every later step of the same request sees it.
_NOTES: ContextVar[RequestNotes | None] = ContextVar("request_notes", default=None)


def begin() -> RequestNotes:
    """New notes for the request being handled (in its task)."""
    notes = RequestNotes()
    _NOTES.set(notes)
    return notes


def current() -> RequestNotes:
    """The notes of the request being handled; outside a request, notes nobody reads."""
    notes = _NOTES.get()
    return notes if notes is not None else RequestNotes()


def warn(text: str) -> None:
    current().warn(text)


def annotate(key: str, value: str, level: int = 0) -> None:
    current().annotate(key, value, level)
