"""The server's log lines: as text (the default) or, with `--log-format=json`, one JSON object a line.

A line logged while a request is handled carries that request's audit ID (`auditID`, the ID its
`Audit-Id` response header and its audit event carry too), read from a context variable the HTTP
layer sets for the request's task: the standard logging module, a formatter and contextvars.
"""

from __future__ import annotations

import contextvars
import datetime
import json
import logging
from typing import Any

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# As upstream writes an audit ID into its logs: at most this many characters of it.
MAX_LOGGED_ID = 64

# The audit ID of the request being handled, in its task (and the tasks it starts).
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("coreio_request_id", default="")


class JSONFormatter(logging.Formatter):
    """A record as one line of JSON: time (RFC 3339, UTC, microseconds), level, logger and message,
    then the request's `auditID` when there is one, the `worker` process's index when the server
    runs several, and `exception` with a traceback."""

    def __init__(self, worker: int | None = None) -> None:
        super().__init__()
        self.worker = worker

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        line: dict[str, Any] = {
            "time": moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if audit_id := request_id.get():
            line["auditID"] = audit_id[:MAX_LOGGED_ID]
        if self.worker is not None:
            line["worker"] = self.worker
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str)


def formatter(log_format: str, worker: int | None = None) -> logging.Formatter:
    if log_format == "json":
        return JSONFormatter(worker)
    if worker is not None:
        return logging.Formatter(TEXT_FORMAT.replace("%(name)s", f"%(name)s[worker {worker}]"))
    return logging.Formatter(TEXT_FORMAT)


def configure(log_format: str, worker: int | None = None) -> None:
    """Lines of the root logger's handlers (a new one on stderr, at INFO, if it has none) in
    `log_format`, tagged with the `worker`'s index in a server of several. Loggers with handlers of
    their own (the audit log's file) are left alone."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.INFO)
    for handler in root.handlers:
        handler.setFormatter(formatter(log_format, worker))
