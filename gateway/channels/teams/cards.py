"""An answer as a Teams message: an Adaptive Card (version 1.4, what Teams renders).

Text from the answer, an article's title or a step is escaped for the card's Markdown (a
backslash before each character Markdown gives a meaning), so it can never become a link or
formatting it did not have; the only links are the citations' and the ticket's ``http(s)`` URLs,
``[n]`` in the answer linking to citation n. The buttons are ``Action.Submit`` whose data names
the action and the turn (``{"deskpilot": "fixed" | "still_broken" | "ticket" | "rate",
"turn_id", "score"?}``): Teams sends them back as a message activity with that ``value``, which
the adapter honours only for the turn's own user.
"""

from __future__ import annotations

import re
from typing import Any

from contracts.events import Action
from gateway.channels.words import FIXED_TEXT, STILL_BROKEN_TEXT, safe_url
from gateway.models import ChatRead

CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
VERSION = "1.4"

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!<>|~])")
_MARKER = re.compile(r"\\\[(\d{1,3})\\\]")
_BOLD = re.compile(r"\\\*\\\*(.+?)\\\*\\\*")


def escape(text: str) -> str:
    """``text`` shown literally by the card's Markdown."""
    return _MARKDOWN.sub(r"\\\1", text)


def _link(url: str, label: str) -> str:
    target = safe_url(url)
    if target is None:
        return escape(label)
    return f"[{escape(label)}]({target})"


def markdown(answer: ChatRead) -> str:
    """The answer's text escaped, its ``**bold**`` kept and each ``[n]`` a citation link."""
    urls = {c.n: c.url for c in answer.citations}
    text = _BOLD.sub(r"**\1**", escape(answer.answer))

    def cite(match: re.Match[str]) -> str:
        n = int(match.group(1))
        return _link(urls[n], f"[{n}]") if n in urls else match.group(0)

    return _MARKER.sub(cite, text)


def _text(text: str, **more: Any) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True, **more}


def _submit(title: str, action: str, turn_id: str, **data: Any) -> dict[str, Any]:
    return {
        "type": "Action.Submit",
        "title": title,
        "data": {"deskpilot": action, "turn_id": turn_id, **data},
    }


def answer_card(answer: ChatRead) -> dict[str, Any]:
    """The card's content: text, questions, checklist step, ticket, incident, citations,
    redaction notice, then the buttons."""
    body: list[dict[str, Any]] = []
    if answer.answer.strip():
        body.append(_text(markdown(answer)))
    if answer.questions:
        body.append(_text("\n".join(f"- {escape(q)}" for q in answer.questions)))
    checklist = answer.checklist
    if answer.action == Action.CHECKLIST and checklist and checklist.steps:
        current = max(0, min(len(checklist.steps) - 1, checklist.current))
        step = escape(checklist.steps[current])
        body.append(_text(f"**Step {current + 1} of {len(checklist.steps)}:** {step}"))
        body.append(
            {
                "type": "ActionSet",
                "actions": [
                    _submit(FIXED_TEXT, "fixed", answer.turn_id),
                    _submit(STILL_BROKEN_TEXT, "still_broken", answer.turn_id),
                ],
            }
        )
    if answer.ticket is not None:
        ticket = answer.ticket
        body.append(
            {
                "type": "Container",
                "style": "emphasis",
                "items": [
                    _text("**Ticket for a technician**"),
                    _text(f"{_link(ticket.url, ticket.key)} · {escape(ticket.status)}"),
                ],
            }
        )
    if answer.incident is not None:
        incident = answer.incident
        body.append(
            _text(f"**Known incident:** {escape(incident.title)} ({escape(incident.status)})")
        )
    if answer.citations:
        lines = [f"{c.n}. {_link(c.url, c.title[:200])}" for c in answer.citations]
        body.append(_text("\n".join(lines), size="Small", spacing="Medium"))
    if answer.redaction_notice:
        body.append(_text(escape(answer.redaction_notice), isSubtle=True, size="Small"))
    body.append(_text("Was this helpful? 1 = not helpful, 5 = very helpful", isSubtle=True))
    body.append(
        {
            "type": "ActionSet",
            "actions": [
                _submit(str(score), "rate", answer.turn_id, score=score) for score in range(1, 6)
            ],
        }
    )
    actions = []
    if answer.ticket is None and answer.action != Action.ESCALATED:
        actions.append(_submit("Talk to a technician", "ticket", answer.turn_id))
    return {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": VERSION,
        "body": body,
        "actions": actions,
    }


def answer_activity(answer: ChatRead) -> dict[str, Any]:
    """The message activity carrying the card (``summary``: the notification's text)."""
    return {
        "type": "message",
        "summary": answer.answer[:200],
        "attachments": [{"contentType": CONTENT_TYPE, "content": answer_card(answer)}],
    }
