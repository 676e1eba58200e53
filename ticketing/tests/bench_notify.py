"""What a notice of an unanswered question costs the ticketing service, on a real valkey, a real
SMTP server (aiosmtpd) and a local Slack webhook, all on loopback.

Run ``python -m ticketing.tests.bench_notify`` from the repository root. It prints, for
``NOTICES`` distinct questions handled one after another (as the service's one consumer does),
the time per notice (median, p95) and notices per second, with e-mail and Slack both
delivered; then the same for as many repeats of one question (de-duplicated: no delivery), which
is what a flood of one recurring question costs. Loopback hides network latency to a real
mail server or Slack (tens to hundreds of milliseconds per message), so the first figure is the
service's own cost, a floor.

Not collected by pytest (timings on shared machines are noise, not a pass/fail signal).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import redis.asyncio as aioredis

from conftest import start_valkey
from contracts.events import Event, UnansweredNotice, new_id
from tests.support.fake_slack_webhook import FakeSlackWebhook
from tests.support.smtp import LocalSmtp
from ticketing.notify.config import NotifyRoute, SmtpConfig
from ticketing.notify.email import EmailChannel
from ticketing.notify.service import Notifier
from ticketing.notify.slack import SlackWebhookChannel

NOTICES = 200


async def nowhere(topic: str, event: Event) -> str:
    return "0-1"


def notice(question: str) -> UnansweredNotice:
    return UnansweredNotice(
        correlation_id=new_id(),
        conversation_id=new_id(),
        outcome="no_answer",
        category="account",
        question=question,
        confidence=0.2,
    )


async def run(notifier: Notifier, questions: list[str]) -> str:
    timings = []
    started = time.perf_counter()
    for question in questions:
        began = time.perf_counter()
        await notifier.on_notice(notice(question), last_attempt=False)
        timings.append((time.perf_counter() - began) * 1000)
    elapsed = time.perf_counter() - started
    timings.sort()
    p95 = timings[int(len(timings) * 0.95) - 1]
    return (
        f"median {statistics.median(timings):6.2f} ms  p95 {p95:6.2f} ms  "
        f"{len(questions) / elapsed:6.1f} per second"
    )


async def bench(redis_url: str, smtp: LocalSmtp, slack: FakeSlackWebhook) -> None:
    client = aioredis.from_url(redis_url)
    route = NotifyRoute.model_validate(
        {"emails": ["iam-team@northwind.example"], "slack_webhook_url": slack.url}
    )
    config = SmtpConfig(
        host=smtp.host,
        port=smtp.port,
        security="none",
        username=None,
        password=None,
        sender="deskpilot@northwind.example",
        timeout_s=10,
        ca_bundle=None,
    )
    async with httpx.AsyncClient(timeout=10) as http:
        notifier = Notifier(
            client,
            {"account": route},
            nowhere,
            email=EmailChannel(config),
            slack=SlackWebhookChannel(http),
            admin_url="https://deskpilot.northwind.example",
            dedup_s=3600,
            max_per_hour=NOTICES * 10,
        )
        distinct = [f"Why does the HR portal reject request number {n}?" for n in range(NOTICES)]
        print(f"{NOTICES} distinct notices, e-mail and Slack: {await run(notifier, distinct)}")
        assert len(smtp.messages) == NOTICES
        assert len(slack.posts) == NOTICES
        repeats = ["Why does the HR portal reject my login?"] * NOTICES
        print(f"{NOTICES} repeats of one question:        {await run(notifier, repeats)}")
        assert len(smtp.messages) == NOTICES + 1
    await client.aclose()


def main() -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        server = start_valkey(Path(data_dir))
        try:
            with LocalSmtp() as smtp, FakeSlackWebhook() as slack:
                asyncio.run(bench(f"{server.connection_url}/0", smtp, slack))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
