"""The anger score: each clue, their combination, mild negativity, and the conversation's course."""

from __future__ import annotations

import uuid

import pytest

from orchestrator.sentiment import (
    AngerScorer,
    AngerWeights,
    Trajectory,
    clauses,
    normalize,
    repeated_question,
    shouting_ratio,
)

THRESHOLD = 0.5  # the checkpoint's default (orchestrator.escalation.DEFAULT_ANGER_THRESHOLD)


@pytest.fixture(scope="module")
def scorer() -> AngerScorer:
    return AngerScorer()


def test_normalising_expands_contractions_and_chat_spellings() -> None:
    assert normalize("I DON'T wanna, it doesnt work pls") == (
        "i do not want to, it does not work please"
    )
    assert normalize("can\u2019t") == "can not"
    assert clauses("No, I don't need it but I'd like a call... thanks!") == [
        "no",
        "i do not need it",
        "i would like a call",
        "thanks",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "this is a bit annoying",
        "the printer is broken",
        "Outlook shows error 0x800CCC0E when sending",
        "access denied when I open the shared drive",
        "my account is locked, can you help?",
        "The application froze and I had to kill it",
        "I lost my password",
        "my laptop is broken again",
        "It still doesn't work after the restart",
        "Urgent: the payroll system is down for my team",
        "the report says FAILED in capital letters",
        "I'm slightly frustrated that the update takes so long",
    ],
)
def test_reports_and_mild_negativity_stay_below_the_threshold(
    scorer: AngerScorer, text: str
) -> None:
    assert scorer.score(text).score < THRESHOLD


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("This is totally pointless, my docking station still won't charge!!", "useless"),
        ("I'm fed up, nothing I try helps with this stupid scanner", "frustrated"),
        ("WHY CAN NOBODY FIX THIS BLOODY PHONE", "shouting"),
        ("what the f*** is going on with teams, it crashed yet again", "profanity"),
        ("Are you reading what I wrote? Not helping, the drive is still missing", "not helping"),
        ("I have been waiting for days and it's still broken, unbelievable", "waiting"),
    ],
)
def test_angry_messages_cross_the_threshold_with_their_reasons(
    scorer: AngerScorer, text: str, reason: str
) -> None:
    result = scorer.score(text)
    assert result.score >= THRESHOLD
    assert any(reason in r for r in result.reasons), result.reasons


def test_fault_words_are_not_feelings(scorer: AngerScorer) -> None:
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    plain = SentimentIntensityAnalyzer().polarity_scores("the printer is broken")["compound"]
    assert plain < -0.4  # VADER alone reads a fault report as negative
    assert scorer.vader_compound("the printer is broken") == 0.0
    assert scorer.vader_compound("I hate this, it is awful") < -0.5


def test_each_clue_on_its_own_stays_below_the_threshold(scorer: AngerScorer) -> None:
    for text in ("what the fuck", "THIS IS NOT OKAY AT ALL", "useless", "seriously???"):
        result = scorer.score(text)
        assert 0 < result.score < THRESHOLD, (text, result)


def test_clues_add_up(scorer: AngerScorer) -> None:
    one = scorer.score("the scanner is useless").score
    two = scorer.score("the scanner is useless and still not working").score
    three = scorer.score("the scanner is useless and still not working!!!").score
    assert one < two < three


def test_profanity_strong_and_mild(scorer: AngerScorer) -> None:
    assert "profanity" in scorer.score("this shit again").reasons
    assert "mild profanity" in scorer.score("damn printer").reasons
    # Words that merely contain one are not profanity.
    assert scorer.score("please reassign the class to the shell script").reasons == []


def test_shouting_needs_long_words_in_capitals_not_acronyms() -> None:
    assert shouting_ratio("MY LAPTOP WILL NOT START") == 1.0
    assert shouting_ratio("The VPN and DHCP server over HTTPS") == 0.0
    assert shouting_ratio("I said URGENT") == 0.0  # one word in capitals is emphasis
    assert 0.4 < shouting_ratio("PLEASE HELP me with the printer") < 0.7


def test_hedging_softens(scorer: AngerScorer) -> None:
    plain = scorer.score("I am frustrated with the update").score
    hedged = scorer.score("I am a little frustrated with the update").score
    assert hedged < plain
    assert any("hedged" in r for r in scorer.score("kind of annoyed, it is useless").reasons)


def test_failed_steps_raise_the_score(scorer: AngerScorer) -> None:
    text = "it still does not work"
    scores = [scorer.score(text, Trajectory(failed_steps=n)).score for n in range(5)]
    assert scores[0] < scores[1] < scores[2] < scores[3]
    assert scores[3] == scores[4]  # at most three steps count
    assert scores[0] < THRESHOLD <= scores[3]
    assert "3 checklist step(s) failed" in scorer.score(text, Trajectory(failed_steps=3)).reasons


def test_the_same_question_again_raises_the_score(scorer: AngerScorer) -> None:
    earlier = ("How can I map the finance network drive on my laptop?",)
    again = "how can I map the finance network drive on my laptop"
    calm = scorer.score(again).score
    result = scorer.score(again, Trajectory(previous_questions=earlier))
    assert result.score > calm
    assert "asked the same question again" in result.reasons
    other = scorer.score("and on Linux?", Trajectory(previous_questions=earlier))
    assert "asked the same question again" not in other.reasons


def test_repeated_question_detection() -> None:
    earlier = ["Where do I find the guest wifi password?"]
    assert repeated_question("guest wifi password, where do I find it?", earlier)
    assert not repeated_question("where do I find the printer drivers?", earlier)
    assert not repeated_question("yes", ["yes"])  # too short to be a question
    assert not repeated_question("where do I find the guest wifi password", [])


def test_clarification_cap_and_everything_together(scorer: AngerScorer) -> None:
    capped = scorer.score("I told you already", Trajectory(clarify_cap_reached=True))
    assert "clarification cap reached" in capped.reasons
    worst = scorer.score(
        "THIS IS USELESS, how many times do I have to ask??",
        Trajectory(
            failed_steps=3,
            previous_questions=("this is useless how many times do I have to ask",),
            clarify_cap_reached=True,
        ),
    )
    assert 0.85 < worst.score <= 1.0


def test_weights_are_configurable() -> None:
    gentle = AngerScorer(AngerWeights(insult=0.0))
    assert gentle.score("this is useless").score == 0.0
    strict = AngerScorer(AngerWeights(insult=0.9))
    assert strict.score("this is useless").score == pytest.approx(0.9)


def test_answering_a_checklist_step_is_not_frustration() -> None:
    scorer = AngerScorer()
    calm = scorer.score("done, still broken", Trajectory(failed_steps=3, answering_step=True))
    assert calm.score < 0.5
    assert all("still not working" not in reason for reason in calm.reasons)
    angry = scorer.score(
        "STILL NOT WORKING!!! this is useless, I've wasted an hour on it",
        Trajectory(failed_steps=2, answering_step=True),
    )
    assert angry.score >= 0.5


def test_a_message_is_read_once_however_many_turns_compare_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every turn compares its message with the conversation's earlier ones: each is normalised
    once, not again on every later turn (before: 1 + 2 per earlier message, every turn)."""
    import orchestrator.sentiment as sentiment

    calls: list[str] = []
    original = sentiment.normalize

    def counting(text: str) -> str:
        calls.append(text)
        return original(text)

    monkeypatch.setattr(sentiment, "normalize", counting)
    fresh = "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:8])  # unseen texts
    earlier = [f"how do I reset the password of printer number {n} {fresh}" for n in range(12)]
    for asked in (
        f"where is the manual of the scanner {fresh}",
        f"my webcam does not work in meetings {fresh}",
        f"which monitor cable fits the docking station {fresh}",
    ):
        assert not repeated_question(asked, earlier)
        earlier.append(asked)
    assert len(calls) == 12 + 3
    assert repeated_question(f"how do I reset the password of printer number 4 {fresh}", earlier)
