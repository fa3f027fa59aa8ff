"""Health probes as k8s.io/apiserver answers them (its healthz package): named checks run in order;
`ok` when all pass, each listed with `?verbose` (`[+]etcd ok`, then `readyz check passed`), always
listed when one fails (`[-]etcd failed: reason withheld`, then `readyz check failed`, 500: the
probes are public, the reason goes to the log); `?exclude=<name>` skips a check; and each check
answers on its own path (`/readyz/etcd`: `ok`, or 500 `internal server error: <reason>`; a name no
check has is 404).

A check is a callable of no arguments returning (or awaiting to) a bool or None: False, or an
exception, fails it; anything else passes. A `CheckFailed` gives the reason in upstream's words
(`not finished`); any other exception is named with its type.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from apiserver.http.responses import NO_CACHE
from apiserver.machinery.errors import go_quote

log = logging.getLogger(__name__)

Check = Callable[[], bool | Awaitable[bool | None] | None]
TEXT_PLAIN = "text/plain; charset=utf-8"
NOT_FOUND = "404 page not found\n"


class CheckFailed(Exception):
    """A check's failure, its message the whole reason (as upstream's checks return errors)."""


async def run_check(check: Check) -> str | None:
    """None when `check` passes, else why it did not."""
    try:
        result = check()
        if inspect.isawaitable(result):
            result = await result
    except CheckFailed as exc:
        return str(exc)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return "check failed" if result is False else None


def _text(status: int, text: str, *, nosniff: bool = True) -> web.Response:
    headers = {"Cache-Control": NO_CACHE, "Content-Type": TEXT_PLAIN}
    if nosniff:
        headers["X-Content-Type-Options"] = "nosniff"
    return web.Response(status=status, body=text.encode(), headers=headers)


async def answer_probe(request: web.Request, name: str, checks: Sequence[tuple[str, Check]]) -> web.Response:
    """The answer of the probe `name` (`readyz`) running `checks`."""
    excluded = set(request.query.getall("exclude", []))
    lines: list[str] = []
    failures: list[str] = []
    for check_name, check in checks:
        if check_name in excluded:
            excluded.discard(check_name)
            lines.append(f"[+]{check_name} excluded: ok")
            continue
        reason = await run_check(check)
        if reason is None:
            lines.append(f"[+]{check_name} ok")
        else:
            lines.append(f"[-]{check_name} failed: reason withheld")
            failures.append(f"[-]{check_name} failed: {reason}")
    if excluded:
        names = ", ".join(go_quote(check_name) for check_name in sorted(excluded))
        lines.append(f"warn: some health checks cannot be excluded: no matches for {names}")
    listed = "".join(line + "\n" for line in lines)
    if failures:
        log.debug("%s check failed:\n%s", name, "\n".join(failures))
        return _text(500, f"{listed}{name} check failed\n")
    if "verbose" not in request.query:
        return _text(200, "ok")
    return _text(200, f"{listed}{name} check passed\n")


async def answer_check(check_name: str, checks: Sequence[tuple[str, Check]]) -> web.Response:
    """The answer on one check's own path."""
    for name, check in checks:
        if name == check_name:
            reason = await run_check(check)
            if reason is None:
                return _text(200, "ok", nosniff=False)
            return _text(500, f"internal server error: {reason}\n")
    return _text(404, NOT_FOUND)


class PostStartHooks:
    """Start-up steps reported as upstream reports its post-start hooks (`poststarthook/<name>`):
    failing until the step is done."""

    def __init__(self) -> None:
        self._done: dict[str, bool] = {}

    def add(self, name: str) -> Callable[[], None]:
        """Registers the hook `name`; the returned callable marks it done."""
        self._done[name] = False

        def done() -> None:
            self._done[name] = True

        return done

    def checks(self) -> list[tuple[str, Check]]:
        return [(f"poststarthook/{name}", self._check(name)) for name in self._done]

    def _check(self, name: str) -> Check:
        def finished() -> bool:
            if not self._done[name]:
                raise CheckFailed("not finished")
            return True

        return finished
