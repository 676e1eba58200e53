"""A local SMTP server (``aiosmtpd``) on loopback that keeps what it receives, for the ticketing
service's e-mail notices.

``with LocalSmtp() as smtp:`` serves on ``smtp.host``/``smtp.port`` in a thread of its own
(aiosmtpd's :class:`~aiosmtpd.controller.Controller`, which waits until the server answers);
:attr:`LocalSmtp.messages` holds each message as parsed (``email.message.EmailMessage``) with its
envelope recipients. Knobs: :meth:`refuse` (RCPT TO of an address answered 550) and
:meth:`defer_next` (the next N messages answered 451 at DATA: a temporary failure).

With ``tls`` (a certificate and its key, :func:`tests.support.served.self_signed`) the server
offers STARTTLS and requires it, and with ``login`` it requires that user name and password
(AUTH PLAIN or LOGIN, only once the session is encrypted).
"""

from __future__ import annotations

import ssl
import threading
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Self

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from deploy.runner import free_port


@dataclass(frozen=True)
class Received:
    recipients: tuple[str, ...]
    message: EmailMessage

    @property
    def text(self) -> str:
        body = self.message.get_body(("plain",))
        return body.get_content() if body is not None else ""


class _Handler:
    def __init__(self, smtp: LocalSmtp) -> None:
        self.smtp = smtp

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        if address in self.smtp.refused:
            return "550 5.1.1 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.smtp.lock:
            if self.smtp.deferrals > 0:
                self.smtp.deferrals -= 1
                return "451 4.3.0 Try again later"
            parsed = message_from_bytes(envelope.original_content, policy=policy.default)
            assert isinstance(parsed, EmailMessage)
            self.smtp.messages.append(Received(tuple(envelope.rcpt_tos), parsed))
        return "250 Message accepted for delivery"


class LocalSmtp:
    host = "127.0.0.1"

    def __init__(
        self, tls: tuple[Path, Path] | None = None, login: tuple[str, str] | None = None
    ) -> None:
        self.port = free_port(self.host)
        self.messages: list[Received] = []
        self.refused: set[str] = set()
        self.deferrals = 0
        self.logins: list[str] = []
        self.lock = threading.Lock()
        secure: dict[str, Any] = {}
        if tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            secure = {"tls_context": context, "require_starttls": True}
        if login is not None:
            secure |= {"authenticator": self._authenticator(login), "auth_required": True}
        self._controller = Controller(_Handler(self), hostname=self.host, port=self.port, **secure)

    def _authenticator(self, login: tuple[str, str]) -> Any:
        def authenticate(
            server: Any, session: Any, envelope: Any, mechanism: str, data: Any
        ) -> AuthResult:
            given = (
                (data.login.decode(), data.password.decode())
                if isinstance(data, LoginPassword)
                else None
            )
            if given == login:
                self.logins.append(login[0])
                return AuthResult(success=True)
            return AuthResult(success=False, handled=False)

        return authenticate

    def refuse(self, address: str) -> None:
        self.refused.add(address)

    def defer_next(self, count: int) -> None:
        self.deferrals = count

    def __enter__(self) -> Self:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()
