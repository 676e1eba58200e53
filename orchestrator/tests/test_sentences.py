"""Cutting a drafted answer into the parts a critique judges, and putting it back together."""

from __future__ import annotations

import pytest

from orchestrator.llm.sentences import split_answer, split_sentences


@pytest.mark.parametrize(
    ("prose", "sentences"),
    [
        ("Open the portal [1]. Choose Reset [1].", ["Open the portal [1].", "Choose Reset [1]."]),
        # A marker written after the full stop stays with its sentence.
        ("Open the portal. [1] Then sign in. [2]", ["Open the portal. [1]", "Then sign in. [2]"]),
        ("Is it on? Yes! Good.", ["Is it on?", "Yes!", "Good."]),
        # Full stops that end nothing: decimals, versions, addresses, abbreviations, code.
        ("Version 2.5 costs 3.50 EUR. Next.", ["Version 2.5 costs 3.50 EUR.", "Next."]),
        ("Use SSO, e.g. Okta. Then go on.", ["Use SSO, e.g. Okta.", "Then go on."]),
        (
            "Go to https://hr.example/a.html now. Done.",
            ["Go to https://hr.example/a.html now.", "Done."],
        ),
        ("Run `cd a. Then` first. Done.", ["Run `cd a. Then` first.", "Done."]),
        ("Ask Dr. Smith. Or Mr. Jones.", ["Ask Dr. Smith.", "Or Mr. Jones."]),
        # Lower case after a full stop is not a new sentence.
        ("See the file named a. b is next.", ["See the file named a. b is next."]),
        ("No full stop at the end", ["No full stop at the end"]),
        ("", []),
    ],
)
def test_prose_is_cut_into_sentences(prose: str, sentences: list[str]) -> None:
    assert split_sentences(prose) == sentences


DRAFT = """\
You can take 25 days of leave a year [1]. Unused days expire in March [2].

1. Open the HR portal [1].
2. Run:
   ```
   hrctl leave request --days 3
   ```
3. Wait for your manager's approval [1].

- Part-time staff: pro rata [1].
- Interns: ask HR [3]."""


def test_a_draft_is_cut_into_sentences_steps_and_items() -> None:
    assert split_answer(DRAFT).parts == [
        "You can take 25 days of leave a year [1].",
        "Unused days expire in March [2].",
        "1. Open the HR portal [1].",
        "2. Run:\n   ```\n   hrctl leave request --days 3\n   ```",  # the step with its command
        "3. Wait for your manager's approval [1].",
        "- Part-time staff: pro rata [1].",
        "- Interns: ask HR [3].",
    ]


def test_a_code_block_belongs_to_the_sentence_before_it() -> None:
    text = "Run this in a terminal [1]:\n\n```\nsudo systemctl restart vpn. Now\n```\n\nDone [1]."
    assert split_answer(text).parts == [
        "Run this in a terminal [1]:\n```\nsudo systemctl restart vpn. Now\n```",
        "Done [1].",
    ]


def test_a_code_block_alone_is_one_part_and_a_heading_another() -> None:
    text = "```\nlpadmin -p nw -E\n```\n\n## Afterwards\n\nPrint a test page [1]."
    assert split_answer(text).parts == [
        "```\nlpadmin -p nw -E\n```",
        "## Afterwards",
        "Print a test page [1].",
    ]


def test_everything_kept_gives_the_same_parts_back() -> None:
    split = split_answer(DRAFT)
    again = split_answer(split.rebuilt([True] * len(split.parts)))
    assert again.parts == split.parts


def test_removed_parts_go_and_steps_are_numbered_again() -> None:
    split = split_answer(DRAFT)
    kept = split.rebuilt([True, False, False, True, True, False, True])
    assert kept == (
        "You can take 25 days of leave a year [1].\n\n"
        "1. Run:\n   ```\n   hrctl leave request --days 3\n   ```\n"
        "2. Wait for your manager's approval [1].\n\n"
        "- Interns: ask HR [3]."
    )


def test_a_block_with_nothing_kept_leaves_no_gap() -> None:
    split = split_answer(DRAFT)
    assert split.rebuilt([False, False, True, True, True, False, False]).startswith("1. Open")
    assert split.rebuilt([False] * len(split.parts)) == ""


def test_steps_continue_across_a_list_broken_by_a_code_block() -> None:
    text = "1. Open a terminal [1].\n```\nvpn reset\n```\n2. Sign in [1].\n3. Reconnect [1]."
    split = split_answer(text)
    assert len(split.parts) == 3
    assert split.rebuilt([False, True, True]) == "1. Sign in [1].\n2. Reconnect [1]."


def test_flags_must_match_the_parts() -> None:
    with pytest.raises(ValueError, match="2 flags for 7 parts"):
        split_answer(DRAFT).rebuilt([True, True])


@pytest.mark.parametrize("odd", ["   ", "\n\n\n", "[1]", "```", "> quoted [1]", "| a | b |"])
def test_odd_drafts_never_break_the_split(odd: str) -> None:
    split = split_answer(odd)
    assert split.rebuilt([True] * len(split.parts)).strip() == odd.strip()
