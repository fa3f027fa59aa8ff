"""--log-format=json: one JSON object a line, naming the audit ID of the request being handled."""

from __future__ import annotations

import asyncio
import json
import logging

from apiserver import logs


def record(message: str, *args: object, exc: BaseException | None = None) -> logging.LogRecord:
    info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    return logging.LogRecord("coreio.test", logging.WARNING, __file__, 1, message, args, info)


def test_a_line_is_one_json_object() -> None:
    line = logs.JSONFormatter().format(record("a %s\nb", "x"))
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed.keys() == {"time", "level", "logger", "message"}
    assert (parsed["level"], parsed["logger"], parsed["message"]) == ("warning", "coreio.test", "a x\nb")


def test_the_request_being_handled_is_named_in_its_task_only() -> None:
    async def handle(audit_id: str) -> str:
        logs.request_id.set(audit_id)
        await asyncio.sleep(0)  # the other task runs meanwhile (a yield)
        return logs.JSONFormatter().format(record("handling"))

    async def main() -> list[str]:
        return list(await asyncio.gather(handle("a" * 70), handle("b")))

    first, second = (json.loads(line) for line in asyncio.run(main()))
    assert first["auditID"] == "a" * logs.MAX_LOGGED_ID and second["auditID"] == "b"
    assert "auditID" not in json.loads(logs.JSONFormatter().format(record("idle")))


def test_an_exception_is_kept_in_the_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError as exc:
        parsed = json.loads(logs.JSONFormatter().format(record("failed", exc=exc)))
    assert parsed["exception"].startswith("Traceback") and "ValueError: boom" in parsed["exception"]
