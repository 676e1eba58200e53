"""An answer as a Slack message: Block Kit blocks and the plain-text fallback.

Everything shown is escaped for Slack's ``mrkdwn`` (``&``, ``<``, ``>``), so text from an answer,
an article's title or a user's own words can never become a mention (``<!channel>``,
``<@U...>``) or a link it did not say; the only links are the citations' and the ticket's, and
only ``http(s)`` URLs without the characters that would end Slack's link syntax. Block Kit's
limits are kept: a section's text at most :data:`SECTION_LIMIT` characters, a message at most
:data:`MAX_BLOCKS` blocks.

The buttons carry the turn id: checklist steps (``deskpilot_fixed``,
``deskpilot_still_broken``), a technician (``deskpilot_ticket``) and a rating from 1 to 5
(``deskpilot_rate``, value ``<turn id>:<score>``). Whoever presses one acts only on a turn of
their own (:mod:`gateway.channels.slack.adapter`).
"""

from __future__ import annotations

import re
from typing import Any

from contracts.events import Action
from gateway.channels.words import FIXED_TEXT, STILL_BROKEN_TEXT, safe_url
from gateway.models import ChatRead

__all__ = ["FIXED_TEXT", "STILL_BROKEN_TEXT", "answer_blocks", "fallback_text", "safe_url"]

SECTION_LIMIT = 3000
MAX_BLOCKS = 50
FALLBACK_LIMIT = 3000
BUTTON_TEXT_LIMIT = 75

FIXED = "deskpilot_fixed"
STILL_BROKEN = "deskpilot_still_broken"
TICKET = "deskpilot_ticket"
RATE = "deskpilot_rate"

PROGRESS_TEXT = {
    "redacting": "Reading your message…",
    "searching": "Searching the knowledge base…",
    "crawling": "Reading the help sites…",
    "indexing": "Learning what I read…",
    "composing": "Writing the answer…",
    "writing": "Writing the answer…",
}
WORKING_TEXT = "Looking into it…"

_BOLD = re.compile(r"\*\*(.+?)\*\*")
_MARKER = re.compile(r"\[(\d{1,3})\]")


def escape(text: str) -> str:
    """``text`` as Slack shows it literally: no mentions, links or entities of its own."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def link(url: str, label: str) -> str:
    """A link, or just the (escaped) label when the URL is not a plain http(s) one."""
    target = safe_url(url)
    shown = escape(label).replace("|", "¦")
    return f"<{target}|{shown}>" if target else shown


def mrkdwn(answer: ChatRead) -> str:
    """The answer's text: escaped, ``**bold**`` as Slack's ``*bold*``, each ``[n]`` a link to
    citation n."""
    urls = {c.n: c.url for c in answer.citations}
    text = _BOLD.sub(r"*\1*", escape(answer.answer))

    def cite(match: re.Match[str]) -> str:
        n = int(match.group(1))
        return link(urls[n], f"[{n}]") if n in urls and safe_url(urls[n]) else match.group(0)

    return _MARKER.sub(cite, text)


def plain(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _sections(text: str) -> list[dict[str, Any]]:
    """``text`` in sections of at most :data:`SECTION_LIMIT` characters, cut at line ends
    where it can be (never inside an entity or a link)."""
    blocks = []
    while text:
        piece = text[:SECTION_LIMIT]
        if len(text) > SECTION_LIMIT:
            cut = piece.rfind("\n")
            if cut < SECTION_LIMIT // 2:
                cut = max(piece.rfind(" "), piece.rfind("&"), piece.rfind("<"))
            if cut > 0:
                piece = text[:cut]
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": piece}})
        text = text[len(piece) :].lstrip("\n")
    return blocks


def _button(text: str, action_id: str, value: str, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": plain(text, BUTTON_TEXT_LIMIT)},
        "action_id": action_id,
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def answer_blocks(answer: ChatRead) -> list[dict[str, Any]]:
    """The answer's blocks: text, questions, checklist, ticket, incident, citations, the
    redaction notice and the buttons."""
    blocks: list[dict[str, Any]] = _sections(mrkdwn(answer)) if answer.answer.strip() else []
    if answer.questions:
        bullets = "\n".join(f"• {escape(q)}" for q in answer.questions)
        blocks += _sections(bullets)
    checklist = answer.checklist
    if answer.action == Action.CHECKLIST and checklist and checklist.steps:
        current = max(0, min(len(checklist.steps) - 1, checklist.current))
        step = f"*Step {current + 1} of {len(checklist.steps)}:* " + escape(
            checklist.steps[current]
        )
        blocks += _sections(step)
        blocks.append(
            {
                "type": "actions",
                "block_id": "checklist",
                "elements": [
                    _button(FIXED_TEXT, FIXED, answer.turn_id, "primary"),
                    _button(STILL_BROKEN_TEXT, STILL_BROKEN, answer.turn_id),
                ],
            }
        )
    if answer.ticket is not None:
        ticket = answer.ticket
        text = f"Ticket {link(ticket.url, ticket.key)} ({escape(ticket.status)})"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text}})
    if answer.incident is not None:
        incident = answer.incident
        text = f"*Known incident:* {escape(incident.title)} ({escape(incident.status)})"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": plain(text, 3000)}})
    if answer.citations:
        lines = [f"[{c.n}] {link(c.url, plain(c.title, 200))}" for c in answer.citations]
        for start in range(0, len(lines), 10):  # a context block holds up to 10 elements
            elements = [{"type": "mrkdwn", "text": line} for line in lines[start : start + 10]]
            blocks.append({"type": "context", "elements": elements})
    if answer.redaction_notice:
        notice = {"type": "mrkdwn", "text": escape(plain(answer.redaction_notice, 2000))}
        blocks.append({"type": "context", "elements": [notice]})
    blocks = blocks[: MAX_BLOCKS - 2]
    if answer.ticket is None and answer.action != Action.ESCALATED:
        blocks.append(
            {
                "type": "actions",
                "block_id": "technician",
                "elements": [_button("Talk to a technician", TICKET, answer.turn_id)],
            }
        )
    blocks.append(
        {
            "type": "actions",
            "block_id": "rating",
            "elements": [
                _button(f"{score}", RATE, f"{answer.turn_id}:{score}") for score in range(1, 6)
            ],
        }
    )
    return blocks


def fallback_text(answer: ChatRead) -> str:
    """The notification's text (and what clients without blocks show)."""
    return plain(escape(answer.answer.strip()) or "Deskpilot answered.", FALLBACK_LIMIT)
