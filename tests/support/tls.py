"""A minimal HTTPS server for TLS tests: real aiohttp on 127.0.0.1, answering who the client is."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from apiserver import pki


async def _whoami(request: web.Request) -> web.Response:
    peer = request.transport.get_extra_info("peercert") if request.transport else None
    subject = {k: v for rdn in (peer or {}).get("subject", ()) for k, v in rdn}
    organizations = [v for rdn in (peer or {}).get("subject", ()) for k, v in rdn if k == "organizationName"]
    return web.json_response(
        {
            "user": subject.get("commonName"),
            "groups": organizations,
            "authorization": request.headers.get("Authorization"),
        }
    )


@asynccontextmanager
async def serve_whoami(serving: pki.ServingCertificate) -> AsyncIterator[int]:
    """Serve `GET /whoami` (client certificate CN/O, Authorization header) with `serving.context`;
    yields the port."""
    app = web.Application()
    app.router.add_get("/whoami", _whoami)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=serving.context)
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()
