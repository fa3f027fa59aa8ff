"""Which mutating webhooks a second round calls (upstream's webhook reinvocation context): a webhook
whose reinvocationPolicy is IfNeeded and that was called before a later webhook changed the
object."""

from __future__ import annotations

from dataclasses import dataclass, field

from apiserver.machinery.types import JSON


@dataclass
class Reinvocation:
    # Called with IfNeeded since the object last changed: reinvoked if it changes again.
    invoked: set[str] = field(default_factory=set)
    # To call in the second round.
    reinvoke: set[str] = field(default_factory=set)
    # A webhook changed the object: the mutating phase runs a second round.
    should_reinvoke: bool = False
    # The object as the last round left it.
    last_output: JSON | None = None

    def object_changed(self) -> None:
        """The webhooks called so far with IfNeeded are called again in the second round."""
        self.reinvoke |= self.invoked
        self.invoked = set()

    def called(self, uid: str, reinvocable: bool, changed: bool) -> None:
        if changed:
            self.object_changed()
            self.should_reinvoke = True
        if reinvocable:
            self.invoked.add(uid)
