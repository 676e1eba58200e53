"""Which turns call for a notice to the people responsible for their category, and what it says."""

from __future__ import annotations

import pytest

from contracts.events import Action
from orchestrator.unanswered import notice_of, unanswered


@pytest.mark.parametrize(
    ("action", "confidence", "threshold", "expected"),
    [
        (Action.NO_ANSWER, None, None, "no_answer"),
        (Action.NO_ANSWER, 0.9, 0.5, "no_answer"),
        (Action.ANSWER, 0.52, None, None),  # no threshold: answers are never reported
        (Action.ANSWER, 0.52, 0.6, "low_confidence"),
        (Action.CHECKLIST, 0.55, 0.6, "low_confidence"),
        (Action.ANSWER, 0.6, 0.6, None),
        (Action.ANSWER, None, 0.6, "low_confidence"),
        (Action.REFUSE, None, 0.6, None),  # off topic: nobody's category
        (Action.CLARIFY, 0.1, 0.6, None),  # asked back: not done yet
        (Action.ESCALATED, 0.1, 0.6, None),  # a ticket reaches people already
    ],
)
def test_which_turns_are_reported(
    action: Action, confidence: float | None, threshold: float | None, expected: str | None
) -> None:
    assert unanswered(action, confidence, threshold) == expected


def test_the_notice_carries_the_redacted_question_category_and_confidence() -> None:
    details: dict[str, object] = {
        "outcome": "no_answer",
        "notice": "no_answer",
        "category": "account",
        "confidence": 0.3141,
        "question": "I am <PERSON_1>; " + "x" * 400,
    }
    notice = notice_of("turn-1", "conv-1", details)
    assert notice is not None
    assert (notice.correlation_id, notice.conversation_id) == ("turn-1", "conv-1")
    assert (notice.outcome, notice.category, notice.confidence) == ("no_answer", "account", 0.3141)
    assert notice.question.startswith("I am <PERSON_1>;")
    assert len(notice.question) == 300
    assert notice_of("t", "c", {"outcome": "answer", "notice": None}) is None
    assert notice_of("t", "c", {"notice": "anything else"}) is None
