"""What a ticket says: summary, description, labels and routing built from an escalation.

Everything in an :class:`~contracts.events.EscalationRequested` is already redacted; this module
only arranges it so a technician reads the whole case at once: the problem, the environment, what
was tried and how it went, the answers given, the sources cited, the attachments (summaries and
error signatures, never bytes), the sentiment and why it was escalated, and the transcript.

Descriptions use Jira's wiki markup (``h3.`` headings, ``*`` bullets), which reads fine as plain
text in the local store too. Jira caps a description at 32,767 characters: a longer transcript
is shortened to its latest lines and returned whole, to be attached as ``transcript.txt``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from contracts.events import EscalationReason, EscalationRequested, Incident
from ticketing.backends.base import (
    TicketDraft,
    incident_label,
    label,
    topic_label,
    user_label,
)
from ticketing.config import CategoryRoute

MAX_DESCRIPTION = 32_000
"""Under Jira's 32,767-character limit, with room for the shortening note."""
MAX_SUMMARY = 250
SILENT_LABEL = "dp-silent"
TRANSCRIPT_FILENAME = "transcript.txt"
SERVICE_KEYS = ("application", "app", "service", "component", "product", "system", "device")
"""Environment facts that name the affected service (matched against incidents)."""


@dataclass
class TicketContent:
    draft: TicketDraft
    transcript_attachment: str | None = None
    """The whole transcript, when the description had to shorten it."""


@dataclass
class TicketFacts:
    """What incident matching needs to know about an open ticket."""

    services: list[str] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)
    category: str | None = None


def request_marker(idempotency_key: str) -> str:
    """A tag put in comments so a retried request never comments twice."""
    return f"[deskpilot-request:{hashlib.sha256(idempotency_key.encode()).hexdigest()[:16]}]"


def one_line(text: str, limit: int = MAX_SUMMARY) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _bullets(lines: list[str]) -> str:
    return "\n".join(f"* {line}" for line in lines) if lines else "* (none)"


def _transcript(event: EscalationRequested) -> list[str]:
    return [f"{line.role}: {line.text}" for line in event.transcript]


def describe(event: EscalationRequested, limit: int = MAX_DESCRIPTION) -> tuple[str, str | None]:
    """The description, and the whole transcript when it had to be shortened to fit."""
    environment = [f"{key}: {value}" for key, value in sorted(event.environment.items())]
    tried = [f"{step.step} — {step.outcome.replace('_', ' ')}" for step in event.tried]
    citations = [f"[{c.n}] {c.title} — {c.url}" for c in event.citations]
    attachments = []
    for a in event.attachments:
        parts = [f"{a.kind}, {a.bytes} bytes"]
        if a.filename:
            parts.append(f"file {a.filename}")
        if a.signatures:
            parts.append("signatures: " + ", ".join(a.signatures))
        if a.first_error_at:
            parts.append(f"first error at {a.first_error_at}")
        if a.text_excerpt:
            parts.append("excerpt: " + one_line(a.text_excerpt, 300))
        attachments.append("; ".join(parts))
    reason = [
        f"Reason: {event.reason.value}"
        + (f" — {event.reason_detail}" if event.reason_detail else "")
    ]
    if event.sentiment is not None:
        reason.append(f"Anger score at escalation: {event.sentiment:.2f} (0 calm, 1 furious)")
    context = [f"Deskpilot user: {event.user_id}", f"Conversation: {event.conversation_id}"]
    if event.category:
        context.append(
            f"Category: {event.category}" + (f" (queue {event.queue})" if event.queue else "")
        )
    if event.incident_id:
        context.append(f"Matched incident: {event.incident_id}")
    head = "\n\n".join(
        [
            f"h3. Problem\n{event.problem.strip() or event.summary}",
            f"h3. Environment\n{_bullets(environment)}",
            f"h3. What was tried\n{_bullets(tried)}",
            f"h3. Answers given\n{_bullets([one_line(a, 500) for a in event.answers_given])}",
            f"h3. Links and citations\n{_bullets(citations)}",
            f"h3. Attachments\n{_bullets(attachments)}",
            f"h3. Sentiment and escalation reason\n{_bullets(reason)}",
            f"h3. Request\n{_bullets(context)}",
        ]
    )
    lines = _transcript(event)
    full = "\n".join(lines)
    text = f"{head}\n\nh3. Transcript (redacted)\n{full or '(empty)'}"
    if len(text) <= limit:
        return text, None
    # Keep the latest lines that fit; the whole transcript goes into an attachment.
    kept: list[str] = []
    room = limit - len(head) - 200
    for line in reversed(lines):
        if room - len(line) - 1 < 0:
            break
        kept.insert(0, line)
        room -= len(line) + 1
    note = (
        f"(shortened: the latest {len(kept)} of {len(lines)} lines; the whole transcript is "
        f"attached as {TRANSCRIPT_FILENAME})"
    )
    head = head[: max(0, limit - 400)] if len(head) > limit - 400 else head
    return f"{head}\n\nh3. Transcript (redacted)\n{note}\n" + "\n".join(kept), full


def build_ticket(
    event: EscalationRequested, routes: dict[str, CategoryRoute], *, silent: bool = False
) -> TicketContent:
    """The ticket to file for ``event``, routed by its category."""
    route = routes.get(event.category or "") or CategoryRoute()
    queue = event.queue or route.queue
    labels = [topic_label(event.topic), user_label(event.user_id)]
    if event.category:
        labels.insert(0, label("", event.category))
    if event.incident_id:
        labels.append(incident_label(event.incident_id))
    if queue:
        labels.append(label("queue-", queue))
    labels += [label("", extra) for extra in route.labels]
    if silent:
        labels.append(SILENT_LABEL)
    description, transcript = describe(event)
    draft = TicketDraft(
        summary=one_line(event.summary) or one_line(event.problem) or "Deskpilot escalation",
        description=description,
        labels=list(dict.fromkeys(labels)),
        category=event.category,
        queue=queue,
        priority=route.priority,
        components=[route.component] if route.component else [],
        user_id=event.user_id,
        conversation_id=event.conversation_id,
        incident_id=event.incident_id,
        idempotency_key=event.idempotency_key,
    )
    return TicketContent(draft=draft, transcript_attachment=transcript)


def follow_up_comment(event: EscalationRequested) -> str:
    """The comment added to the user's open ticket on the same topic instead of a new ticket."""
    tried = [f"{step.step} — {step.outcome.replace('_', ' ')}" for step in event.tried]
    why = "asked again" if event.reason != EscalationReason.ANGER else "is getting frustrated"
    parts = [
        f"The user {why} about this problem (reason: {event.reason.value}).",
        f"Summary: {one_line(event.summary)}",
        f"Problem: {event.problem.strip()}" if event.problem.strip() else "",
        "Tried since:\n" + _bullets(tried) if tried else "",
        "Latest messages:\n" + "\n".join(_transcript(event)[-6:]) if event.transcript else "",
        request_marker(event.idempotency_key),
    ]
    return "\n\n".join(p for p in parts if p)


def facts(event: EscalationRequested) -> TicketFacts:
    """Services, error signatures and category of an escalation, for incident matching."""
    services = [v for k, v in event.environment.items() if k.lower() in SERVICE_KEYS and v]
    _, _, topic_service = event.topic.partition(":")
    if topic_service:
        services.append(topic_service)
    signatures = [s for a in event.attachments for s in a.signatures]
    for key, value in event.environment.items():
        if "error" in key.lower():
            signatures += [s for s in re.split(r"[,;\s]+", value) if s]
    return TicketFacts(
        services=sorted({normalise(s) for s in services if normalise(s)}),
        signatures=sorted({normalise(s) for s in signatures if normalise(s)}),
        category=event.category,
    )


def normalise(value: str) -> str:
    return re.sub(r"\s+", " ", value).strip().lower()


def incident_comment(incident: Incident) -> str:
    lines = [
        f"Deskpilot linked this ticket to incident {incident.id}: {incident.title} "
        f"(status: {incident.status}).",
    ]
    if incident.affected_services:
        lines.append("Affected: " + ", ".join(incident.affected_services))
    if incident.latest_update:
        lines.append(f"Latest update: {one_line(incident.latest_update, 1000)}")
    if incident.url:
        lines.append(f"Status page: {incident.url}")
    return "\n".join(lines)


def incident_resolved_comment(incident: Incident) -> str:
    text = f"Incident {incident.id} ({incident.title}) is resolved."
    if incident.latest_update:
        text += f"\nLatest update: {one_line(incident.latest_update, 1000)}"
    return text + "\nPlease check with the user whether their problem is gone."
