"""E-mail through the configured SMTP server, with ``aiosmtplib``.

STARTTLS (port 587, the default), implicit TLS (465) or, on a trusted local relay only, none.
A refusal the server means for good (a 5xx reply, every recipient refused) is a
:class:`Undeliverable`; anything else (no connection, a timeout, a 4xx reply) a
:class:`~ticketing.notify.slack.TryLater`, which the service hands back to the bus to retry.
Some recipients refused and the others accepted is a delivery, whose outcome says how many were
refused and the server's codes, not their addresses (the outcome is audited).
"""

from __future__ import annotations

import ssl
from email.message import EmailMessage

import aiosmtplib

from ticketing.notify.config import SmtpConfig
from ticketing.notify.slack import TryLater, Undeliverable


class EmailChannel:
    def __init__(self, config: SmtpConfig) -> None:
        self.config = config
        self._tls: ssl.SSLContext | None = (
            ssl.create_default_context(cafile=str(config.ca_bundle)) if config.ca_bundle else None
        )

    async def send(self, recipients: tuple[str, ...], subject: str, text: str) -> str:
        """Send one e-mail; its outcome: ``sent``, or ``sent (1 of 2 refused: 550)``."""
        config = self.config
        message = EmailMessage()
        message["From"] = config.sender
        message["To"] = ", ".join(recipients)
        message["Subject"] = subject
        message.set_content(text)
        try:
            refused, _ = await aiosmtplib.send(
                message,
                hostname=config.host,
                port=config.port,
                username=config.username,
                password=config.password.get_secret_value() if config.password else None,
                use_tls=config.security == "tls",
                start_tls=config.security == "starttls",
                tls_context=self._tls,
                timeout=config.timeout_s,
            )
        except aiosmtplib.SMTPRecipientsRefused as exc:
            raise Undeliverable(
                f"the SMTP server refused every recipient ({_codes(exc)})"
            ) from None
        except aiosmtplib.SMTPResponseException as exc:
            if 500 <= exc.code < 600:
                raise Undeliverable(f"the SMTP server refused the e-mail ({exc.code})") from None
            raise TryLater(f"the SMTP server answered {exc.code}") from None
        except (aiosmtplib.SMTPException, OSError) as exc:
            raise TryLater(f"cannot send through the SMTP server ({type(exc).__name__})") from None
        if not refused:
            return "sent"
        codes = ", ".join(str(reply.code) for reply in refused.values())
        return f"sent ({len(refused)} of {len(recipients)} refused: {codes})"


def _codes(exc: aiosmtplib.SMTPRecipientsRefused) -> str:
    return ", ".join(str(refused.code) for refused in exc.recipients) or "no reason"
