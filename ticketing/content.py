"""What a ticket says: summary, description, labels and routing built from an escalation.

Everything in an :class:`~contracts.events.EscalationRequested` is already redacted; this module
only arranges it so a technician reads the whole case at once: the problem, the environment, what
was tried and how it went, the answers given, the sources cited, the attachments (summaries and
error signatures, never bytes), the sentiment and why it was escalated, and the transcript.

Descriptions and comments use Jira's wiki markup, which reads as plain text in the local store
too. Text that came from a user (or from any outside source: knowledge-base steps, attachment
names, status pages) is never markup: it goes into ``{noformat}`` blocks, where Jira shows it
verbatim in a grey box and renders no headings, links, images, mentions, colours, panels or
macros. A ``{noformat`` inside that text, which would close the block early, gets a space after
its brace; line breaks are normalised and control characters dropped. Inside a block, user text
never starts a line (our own prefix or a two-space indent comes first), so a plain-text reader
or parser never mistakes it for one of our headings. Only our own words, enum values, numbers,
identifiers of a plain alphabet (:data:`PLAIN_TOKEN`) and citation URLs of a plain alphabet
(:data:`PLAIN_URL`, left clickable) are written as markup.

Conversation and turn ids are never written into a ticket: the ticket says which conversation it
came from with :func:`~ticketing.backends.base.conversation_reference`. Labels come from fixed
vocabularies and digests only (see :func:`ticket_labels`).

Jira caps a description at 32,767 characters: every section is bounded so the head always fits,
and a longer transcript is shortened to its latest lines and returned whole, to be attached as
``transcript.txt``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from contracts.events import EscalationReason, EscalationRequested, Incident
from ticketing.backends.base import (
    TicketDraft,
    conversation_reference,
    incident_label,
    label,
    requester_key,
    topic_label,
    user_label,
)
from ticketing.config import DEFAULT_ROUTES, CategoryRoute

MAX_DESCRIPTION = 32_000
"""Under Jira's 32,767-character limit, with room for the shortening note."""
MAX_SUMMARY = 250
SILENT_LABEL = "dp-silent"
TRANSCRIPT_FILENAME = "transcript.txt"
SERVICE_KEYS = ("application", "app", "service", "component", "product", "system", "device")
"""Environment facts that name the affected service (matched against incidents)."""

NOFORMAT = "{noformat}"
HEADINGS = (
    "Problem",
    "Environment",
    "What was tried",
    "Answers given",
    "Links and citations",
    "Attachments",
    "Sentiment and escalation reason",
    "Request",
    "Transcript (redacted)",
)
"""The description's sections, in order: the only lines of a description starting with h3."""
INDENT = "  "
"""Put before every line of user text that would otherwise start a line."""

PLAIN_TOKEN = re.compile(r"^[A-Za-z0-9]+(?:(?:[-_.]| & | )[A-Za-z0-9]+){0,15}$")
"""Identifiers and names that mean nothing in wiki markup: letters and digits, joined by single
hyphens, underscores, dots, spaces or " & " (no emphasis can open after a letter or digit)."""
PLAIN_URL = re.compile(
    r"^https?://[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(?::[0-9]{1,5})?"
    r"(?:/[A-Za-z0-9/.,;=&%-]*)?(?:\?[A-Za-z0-9/.,;=&%-]*)?$"
)
"""Links written as markup (clickable): http(s), and no character that means something in wiki
markup (no brackets, braces, pipes, bangs, tildes, carets, stars, underscores, pluses, hashes)."""

# Section bounds: the head of a description always fits under MAX_DESCRIPTION whatever it holds.
MAX_PROBLEM = 4000
MAX_BLOCK = 3000
MAX_LINE = 500
MAX_LINKS = 10
MAX_TRANSCRIPT_LINE = 4000

_NOFORMAT_OPENING = re.compile(r"\{(?=noformat)", re.IGNORECASE)
_LINE_BREAKS = re.compile(r"\r\n|[\r\x0b\x0c\x85\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_HEADING = re.compile(r"^h3\. (.+)$", re.MULTILINE)


def inert(text: str) -> str:
    """``text`` made safe to put between ``{noformat}`` tags: it cannot close the block (a
    ``{noformat`` of its own gets a space after the brace), its line breaks are ``\\n`` and it
    holds no control characters."""
    text = _CONTROL.sub("", _LINE_BREAKS.sub("\n", text))
    return _NOFORMAT_OPENING.sub("{ ", text)


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def flat(text: str, limit: int = MAX_LINE) -> str:
    """One line of inert text, at most ``limit`` characters."""
    return inert(one_line(text, limit))


def lines_of(text: str, first: str = INDENT, limit: int = MAX_PROBLEM) -> list[str]:
    """Inert text as lines for a block: the first after ``first`` (our prefix), the others
    indented, so no line of it starts a line of the ticket."""
    lines = inert(shorten(text.strip(), limit)).split("\n")
    return [first + lines[0], *(INDENT + line for line in lines[1:])]


def block(lines: list[str], limit: int = MAX_BLOCK) -> str:
    """Lines built by this module (each starting with our own prefix, the text in them inert)
    in one ``{noformat}`` block of at most ``limit`` characters."""
    body = shorten("\n".join(lines), limit)
    return f"{NOFORMAT}\n{body}\n{NOFORMAT}"


def plain(value: str | None) -> str | None:
    """``value`` when it can be written as markup as it is (:data:`PLAIN_TOKEN`), else None."""
    return value if value is not None and PLAIN_TOKEN.match(value) else None


def safe_link(url: str) -> str | None:
    """``url`` when it may be written as a clickable link (:data:`PLAIN_URL`), else None."""
    return url if len(url) <= 300 and PLAIN_URL.match(url) else None


def section_text(description: str, title: str) -> str:
    """The plain text of a description's section ``h3. <title>`` ('' when there is none): its
    ``{noformat}`` tags dropped and the indent this module adds taken off. For readers of
    Deskpilot's own tickets, such as ``deskpilot tickets export``."""
    headings = list(_HEADING.finditer(description))
    for n, heading in enumerate(headings):
        if heading.group(1).strip() == title:
            end = headings[n + 1].start() if n + 1 < len(headings) else len(description)
            body = description[heading.end() : end].strip("\n").split("\n")
            kept = [line.removeprefix(INDENT) for line in body if line != NOFORMAT]
            return "\n".join(kept).strip()
    return ""


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
    flat_text = re.sub(r"\s+", " ", _CONTROL.sub("", text)).strip()
    return flat_text if len(flat_text) <= limit else flat_text[: limit - 1].rstrip() + "…"


def _words(value: str) -> str:
    """An enum value or a vocabulary word in words (``user_request`` -> ``user request``)."""
    return value.replace("_", " ")


def _none_or_block(lines: list[str], limit: int = MAX_BLOCK) -> str:
    return block(lines, limit) if lines else "none"


def _transcript_line(role: str, text: str) -> list[str]:
    return lines_of(text, first=f"{role}: ", limit=MAX_TRANSCRIPT_LINE)


def _transcript(event: EscalationRequested) -> list[str]:
    """The transcript as a plain-text file (an attachment: never rendered as markup)."""
    return [f"{line.role}: {line.text}" for line in event.transcript]


def _tried(event: EscalationRequested) -> list[str]:
    return [f"* {flat(step.step)} — {_words(step.outcome)}" for step in event.tried]


def _attachment_lines(event: EscalationRequested) -> list[str]:
    lines = []
    for a in event.attachments[:10]:
        parts = [f"{a.kind}, {a.bytes} bytes"]
        if a.filename:
            parts.append(f"file {flat(a.filename, 200)}")
        if a.signatures:
            parts.append("signatures: " + flat(", ".join(a.signatures), 600))
        if a.first_error_at:
            parts.append(f"first error at {flat(a.first_error_at, 60)}")
        if a.text_excerpt:
            parts.append("excerpt: " + flat(a.text_excerpt, 300))
        lines.append("* " + "; ".join(parts))
    return lines


def _links(event: EscalationRequested) -> str:
    """Citation URLs of a plain alphabet as clickable bullets; the others, and titles that say
    more than their URL, in a block."""
    bullets: list[str] = []
    rest: list[str] = []
    for citation in event.citations[: MAX_LINKS * 2]:
        link = safe_link(citation.url)
        if link is not None and len(bullets) < MAX_LINKS:
            bullets.append(f"* source {citation.n}: {link}")
        else:
            rest.append(f"* source {citation.n}: {flat(citation.url, 300)}")
        if citation.title.strip() and citation.title.strip() != citation.url:
            rest.append(f"* source {citation.n} is titled: {flat(citation.title, 200)}")
    parts = ["\n".join(bullets)] if bullets else []
    if rest:
        parts.append(block(rest, 2000))
    return "\n".join(parts) or "none"


def _reason(event: EscalationRequested) -> str:
    lines = [f"* Reason: {_words(event.reason.value)}"]
    if event.sentiment is not None:
        lines.append(f"* Anger score at escalation: {event.sentiment:.2f} (0 calm, 1 furious)")
    if event.reason_detail.strip():
        lines.append(block(lines_of(event.reason_detail, first="Why: ", limit=1000), 1100))
    return "\n".join(lines)


def known_category(category: str | None, routes: dict[str, CategoryRoute]) -> str | None:
    """``category`` when it belongs to the vocabulary (the default routes' and the configured
    routes' categories), else None."""
    if category and (category in DEFAULT_ROUTES or category in routes) and plain(category):
        return category
    return None


def _request(event: EscalationRequested, routes: dict[str, CategoryRoute]) -> str:
    lines: list[str] = []
    facts_block: list[str] = []
    if event.user_id == "anonymous" or event.user_id.startswith("anonymous:"):
        lines.append("* Requester: anonymous (not signed in)")
    elif (user := plain(event.user_id)) is not None:
        lines.append(f"* Requester: {user}")
    else:
        lines.append("* Requester: a signed-in user (id below)")
        facts_block.append(f"requester: {flat(event.user_id, 200)}")
    lines.append(
        f"* Conversation: reference {conversation_reference(event.conversation_id)}. The "
        "reference opens nothing: technicians signed in to Deskpilot read the conversation "
        "under this ticket's key in the admin API, and admins its audit trail."
    )
    category = known_category(event.category, routes)
    route = routes.get(category or "") or CategoryRoute()
    queue = event.queue or route.queue
    if category is not None:
        where = f" (queue {plain(queue)})" if plain(queue) else ""
        lines.append(f"* Category: {_words(category)}{where}")
    elif event.category:
        facts_block.append(f"category: {flat(event.category, 100)}")
    if queue and not (category and plain(queue)):
        facts_block.append(f"queue: {flat(queue, 100)}")
    if event.incident_id:
        incident = plain(event.incident_id)
        if incident is not None:
            lines.append(f"* Matched incident: {incident}")
        else:
            facts_block.append(f"matched incident: {flat(event.incident_id, 130)}")
    if facts_block:
        lines.append(block(facts_block, 1000))
    return "\n".join(lines)


def describe(
    event: EscalationRequested,
    limit: int = MAX_DESCRIPTION,
    routes: dict[str, CategoryRoute] | None = None,
) -> tuple[str, str | None]:
    """The description, and the whole transcript when it had to be shortened to fit."""
    environment = [
        f"* {flat(key, 60)}: {flat(value, 300)}"
        for key, value in sorted(event.environment.items())[:20]
    ]
    answers = [f"* {flat(answer, MAX_LINE)}" for answer in event.answers_given[:20]]
    sections = {
        "Problem": block(lines_of(event.problem.strip() or event.summary), MAX_PROBLEM + 200),
        "Environment": _none_or_block(environment, 2000),
        "What was tried": _none_or_block(_tried(event)),
        "Answers given": _none_or_block(answers, 2000),
        "Links and citations": _links(event),
        "Attachments": _none_or_block(_attachment_lines(event)),
        "Sentiment and escalation reason": _reason(event),
        "Request": _request(event, routes or {}),
    }
    head = "\n\n".join(f"h3. {title}\n{body}" for title, body in sections.items())
    heading = f"h3. {HEADINGS[-1]}"
    lines = [part for line in event.transcript for part in _transcript_line(line.role, line.text)]
    whole = block(lines, len("\n".join(lines)) + 1) if lines else "none"
    text = f"{head}\n\n{heading}\n{whole}"
    full = "\n".join(_transcript(event))
    if len(text) <= limit:
        return text, None
    # Keep the latest messages that fit; the whole transcript goes into an attachment.
    room = limit - len(head) - len(heading) - 300
    kept: list[list[str]] = []
    for line in reversed(event.transcript):
        message = _transcript_line(line.role, line.text)
        size = len("\n".join(message)) + 1
        if room - size < 0:
            break
        kept.insert(0, message)
        room -= size
    note = (
        f"(shortened: the latest {len(kept)} of {len(event.transcript)} messages; the whole "
        f"transcript is attached as {TRANSCRIPT_FILENAME})"
    )
    shown = [part for message in kept for part in message]
    body = block(shown, limit) if shown else "none"
    return f"{head}\n\n{heading}\n{note}\n{body}", full


def ticket_labels(
    event: EscalationRequested,
    category: str | None,
    route: CategoryRoute,
    queue: str | None,
    *,
    silent: bool,
) -> list[str]:
    """The ticket's labels, visible to everyone who can see the ticket: only fixed vocabularies
    (``category`` as checked by :func:`known_category`, the queue and the route's labels as
    configured, the incident id) and digests (the requester, the topic; the idempotency key's
    is added by the backend). Nothing a user wrote: the topic key is made of the user's words,
    so it is a digest too."""
    labels = [topic_label(event.topic), user_label(requester_key(event.user_id))]
    if category is not None:
        labels.insert(0, label("", category))
    if event.incident_id:
        labels.append(incident_label(event.incident_id))
    if queue:
        labels.append(label("queue-", queue))
    labels += [label("", extra) for extra in route.labels]
    if silent:
        labels.append(SILENT_LABEL)
    return list(dict.fromkeys(labels))


def build_ticket(
    event: EscalationRequested, routes: dict[str, CategoryRoute], *, silent: bool = False
) -> TicketContent:
    """The ticket to file for ``event``, routed by its category."""
    category = known_category(event.category, routes)
    route = routes.get(category or "") or CategoryRoute()
    queue = event.queue or route.queue
    description, transcript = describe(event, routes=routes)
    draft = TicketDraft(
        summary=one_line(event.summary) or one_line(event.problem) or "Deskpilot escalation",
        description=description,
        labels=ticket_labels(event, category, route, queue, silent=silent),
        category=category,
        queue=queue,
        priority=route.priority,
        components=[route.component] if route.component else [],
        user_id=requester_key(event.user_id),
        conversation_id=event.conversation_id,
        incident_id=event.incident_id,
        idempotency_key=event.idempotency_key,
    )
    return TicketContent(draft=draft, transcript_attachment=transcript)


def follow_up_comment(event: EscalationRequested) -> str:
    """The comment added to the user's open ticket on the same topic instead of a new ticket."""
    why = "asked again" if event.reason != EscalationReason.ANGER else "is getting frustrated"
    parts = [f"The user {why} about this problem (reason: {_words(event.reason.value)})."]
    text = [*lines_of(event.summary, first="Summary: ", limit=MAX_SUMMARY)]
    if event.problem.strip():
        text += lines_of(event.problem, first="Problem: ")
    parts.append(block(text, MAX_PROBLEM + 400))
    if event.tried:
        parts.append("Tried since:\n" + block(_tried(event)))
    if event.transcript:
        latest = [
            part
            for line in event.transcript[-6:]
            for part in _transcript_line(line.role, line.text)
        ]
        parts.append("Latest messages:\n" + block(latest, 12_000))
    parts.append(block([request_marker(event.idempotency_key)]))
    return "\n\n".join(parts)


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


def _incident_lines(incident: Incident) -> list[str]:
    lines = [f"incident: {flat(incident.id, 130)}"]
    lines += lines_of(incident.title, first="title: ", limit=MAX_LINE)
    lines.append(f"status: {flat(incident.status, 60)}")
    if incident.affected_services:
        lines.append("affected: " + flat(", ".join(incident.affected_services), MAX_LINE))
    if incident.latest_update:
        lines += lines_of(incident.latest_update, first="latest update: ", limit=1000)
    return lines


def _status_page(incident: Incident) -> list[str]:
    if not incident.url:
        return []
    link = safe_link(incident.url)
    return [f"Status page: {link}"] if link else []


def _marker_block(marker: str | None) -> list[str]:
    return [block([marker], 300)] if marker else []


def incident_comment(incident: Incident, marker: str | None = None) -> str:
    """The comment on a ticket an incident explains. The incident's words (a status page's or a
    monitoring system's) are shown verbatim, never as markup."""
    name = plain(incident.id) or "(see below)"
    lines = [f"Deskpilot linked this ticket to incident {name}.", block(_incident_lines(incident))]
    if incident.url and not safe_link(incident.url):
        lines.append(block([f"status page: {flat(incident.url, 300)}"], 400))
    return "\n".join([*lines, *_status_page(incident), *_marker_block(marker)])


def incident_resolved_comment(incident: Incident, marker: str | None = None) -> str:
    name = plain(incident.id) or "(see below)"
    lines = [f"Incident {name} is resolved.", block(_incident_lines(incident))]
    lines.append("Please check with the user whether their problem is gone.")
    return "\n".join([*lines, *_marker_block(marker)])
