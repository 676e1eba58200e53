"""One way for tests to serve an HTTP fake of an outside system: an ASGI app (Starlette) on a
real uvicorn server, in a daemon thread, on a free loopback port.

:func:`served` is a context manager: it binds a loopback socket on a port the system picks (the
socket is handed to uvicorn already bound, so no other process can take the port in between, as
it could after :func:`deploy.runner.free_port`), starts the server, waits until uvicorn says it is
listening (an event, no fixed sleep), yields the base URL (``http://127.0.0.1:PORT``, no trailing
slash) and at the end stops the server and waits for its thread.

:class:`ServedFake` is the base of the fakes in this package: a subclass builds its app in
:meth:`ServedFake.build_app`, and ``with fake:`` (or :meth:`ServedFake.start` and
:meth:`ServedFake.stop`) serves it, with the URL in :attr:`ServedFake.origin`.

    with served(app) as url:
        httpx.get(url + "/health")
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Self

import uvicorn
from starlette.types import ASGIApp

HOST = "127.0.0.1"


class _Server(uvicorn.Server):
    """A uvicorn server that sets :attr:`ready` once its startup is over, listening or not."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self.ready.set()


@contextmanager
def served(
    app: ASGIApp,
    *,
    host: str = HOST,
    port: int = 0,
    ready_timeout_s: float = 10.0,
    stop_timeout_s: float = 10.0,
    tls: tuple[Path, Path] | None = None,
) -> Iterator[str]:
    """Serve ``app`` on ``host`` at a free port (or ``port``, such as another loopback
    address's) while the block runs; yields its base URL.

    With ``tls`` (a certificate and its key, :func:`self_signed`), it serves HTTPS and the URL
    says so. Raises :class:`RuntimeError` when the server does not start within
    ``ready_timeout_s``.
    Requests still running at the end get one second to finish before they are cancelled."""
    # IPPROTO_TCP named, not left 0: asyncio sets TCP_NODELAY only on sockets that say they are
    # TCP, and without it every answer sent in two writes waits for a delayed ACK (~40 ms).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        loop="asyncio",
        lifespan="off",
        log_config=None,  # leave the test process's logging as it is
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
        ssl_certfile=str(tls[0]) if tls else None,
        ssl_keyfile=str(tls[1]) if tls else None,
    )
    server = _Server(config)

    def run() -> None:
        try:
            server.run(sockets=[sock])
        finally:
            server.ready.set()  # a server that failed before its startup wakes the caller too
            sock.close()

    thread = threading.Thread(target=run, name=f"served:{port}", daemon=True)
    thread.start()
    try:
        if not server.ready.wait(ready_timeout_s) or not server.started:
            raise RuntimeError(f"the test server on {host}:{port} did not start")
        yield f"{'https' if tls else 'http'}://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(stop_timeout_s)
        if thread.is_alive():
            server.force_exit = True
            thread.join(stop_timeout_s)


def self_signed(folder: Path, host: str = HOST) -> tuple[Path, Path]:
    """A certificate for ``host`` (an IP address) signed by its own key, valid for a day, written
    to ``folder`` as ``cert.pem`` and ``key.pem``; the certificate is its own CA bundle."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class ServedFake:
    """Base of a fake served over real HTTP while it is in use (``with`` or start/stop)."""

    tls: tuple[Path, Path] | None = None
    """A certificate and key to serve HTTPS with (clients that refuse plain HTTP, as msal)."""
    origin: str = ""
    """``http://127.0.0.1:PORT`` once served (kept after :meth:`stop`); empty before."""
    _serving: ExitStack | None = None

    def build_app(self) -> ASGIApp:
        """The ASGI app that answers as the outside system would."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        """The URL a client is configured with (the origin unless the API lives under a path)."""
        return self.origin

    def start(self, ready_timeout_s: float = 10.0) -> Self:
        if self._serving is not None:
            raise RuntimeError(f"{type(self).__name__} is already being served")
        with ExitStack() as stack:
            self.origin = stack.enter_context(
                served(self.build_app(), ready_timeout_s=ready_timeout_s, tls=self.tls)
            )
            self._serving = stack.pop_all()
        return self

    def stop(self) -> None:
        serving, self._serving = self._serving, None
        if serving is not None:
            serving.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
