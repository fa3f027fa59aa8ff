"""The EventExport an exporter serves: where it is, and the end of the exporter when it is gone."""

from __future__ import annotations

from dataclasses import dataclass

from coreio_export.connection import ExportError

EXPORTS = "/apis/events.core.io/v1alpha1"


class ExportGone(ExportError):
    """The EventExport was deleted: the exporter has nothing left to do."""


@dataclass(frozen=True)
class Target:
    namespace: str
    name: str

    @property
    def collection(self) -> str:
        return f"{EXPORTS}/namespaces/{self.namespace}/eventexports"

    @property
    def path(self) -> str:
        return f"{self.collection}/{self.name}"

    def gone(self, how: str) -> ExportGone:
        return ExportGone(f"the EventExport {self.namespace}/{self.name} {how}")
