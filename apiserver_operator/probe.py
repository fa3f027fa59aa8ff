"""What the API server's pods present, asked as the aggregator asks: TLS handshakes with the
Service's ClusterIP. Written with the standard library: one handshake and the peer's certificate is
all it takes."""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from cryptography import x509

HANDSHAKE_TIMEOUT = 3.0


def _context() -> ssl.SSLContext:
    # What is presented, not whether it is trusted: the caller checks the issuer itself.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def _handshake(host: str, port: int, server_name: str) -> x509.Certificate:
    async with asyncio.timeout(HANDSHAKE_TIMEOUT):
        _, writer = await asyncio.open_connection(host, port, ssl=_context(), server_hostname=server_name)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
        with contextlib.suppress(OSError, TimeoutError, ssl.SSLError):
            async with asyncio.timeout(HANDSHAKE_TIMEOUT):
                await writer.wait_closed()
    return x509.load_der_x509_certificate(der)


async def presented_certificates(
    host: str, port: int, server_name: str, *, samples: int = 3
) -> tuple[x509.Certificate, ...]:
    """The leaves `samples` fresh handshakes got (a Service spreads them over its pods); those that
    failed are left out, so nothing answering gives ()."""
    found = []
    for _ in range(samples):
        with contextlib.suppress(OSError, TimeoutError, ssl.SSLError, ValueError):
            found.append(await _handshake(host, port, server_name))
    return tuple(found)
