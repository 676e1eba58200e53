"""Turns the people responsible for a category hear about: not answered, or answered with low
confidence (the best match is weak, or the critique of the model's answer doubts it).

A turn's decision record says so (its ``notice`` detail, set by :func:`unanswered`); with the
turn's answer, :mod:`orchestrator.handlers` publishes it on ``notice.unanswered``
(:func:`notice_of`) in the same write, with the redacted question and the category. The
ticketing service decides who is told (its ``TICKETING_NOTIFY_ROUTES``), how often, and by what
means; the orchestrator only says that the turn was one of these.
"""

from __future__ import annotations

from collections.abc import Mapping

from contracts.events import Action, NoticeOutcome, UnansweredNotice

ANSWERED = frozenset({Action.ANSWER, Action.CHECKLIST})


def unanswered(
    action: Action,
    confidence: float | None,
    threshold: float | None,
    *,
    judged: float | None = None,
    judged_threshold: float | None = None,
) -> NoticeOutcome | None:
    """``no_answer`` for a turn not answered; ``low_confidence`` for an answer whose best match
    is below ``threshold`` (None: never) or that the critique judged :func:`unsure` (``judged``:
    its confidence, None when the answer was not critiqued); None for everything else (a
    greeting, a refusal, a question asked back, a ticket)."""
    if action is Action.NO_ANSWER:
        return "no_answer"
    if action not in ANSWERED:
        return None
    weak_match = threshold is not None and (confidence is None or confidence < threshold)
    if weak_match or unsure(judged, judged_threshold):
        return "low_confidence"
    return None


def unsure(judged: float | None, threshold: float | None) -> bool:
    """The critique's confidence in an answer (``judged``; None: not critiqued) is below
    ``threshold``: the answer says it is not sure and offers a technician, and the turn is
    reported as answered with low confidence (:func:`unanswered`)."""
    return judged is not None and threshold is not None and judged < threshold


def notice_of(
    correlation_id: str, conversation_id: str, details: Mapping[str, object]
) -> UnansweredNotice | None:
    """The notice a decision record's details call for, if any (``question`` is the redacted
    question the record carries)."""
    outcome = details.get("notice")
    if outcome not in ("no_answer", "low_confidence"):
        return None
    confidence = details.get("confidence")
    category = details.get("category")
    return UnansweredNotice(
        correlation_id=correlation_id,
        conversation_id=conversation_id,
        outcome=outcome,
        category=category if isinstance(category, str) else None,
        question=str(details.get("question") or "")[:300],
        confidence=float(confidence) if isinstance(confidence, (int, float)) else None,
    )
