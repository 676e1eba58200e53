"""The arithmetic of ``deskpilot eval ocr``: normalisation and the character error rate."""

from __future__ import annotations

import pytest

from deploy.evals.ocr import edit_distance, normalise, score


def test_normalise_strips_lines_collapses_spaces_and_drops_empty_lines() -> None:
    assert normalise("  Error   0x80070005:\tdenied \n\n   \nOK  Cancel\n") == (
        "Error 0x80070005: denied\nOK Cancel"
    )


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("", "", 0),
        ("abc", "", 3),
        ("", "abc", 3),
        ("kitten", "sitting", 3),
        ("0x80070005", "Ox80070005", 1),
        ("C:\\Users", "C:IUsers", 1),
        ("northwind.example", "northwind example", 1),
        ("flaw", "lawn", 2),
    ],
)
def test_edit_distance(a: str, b: str, distance: int) -> None:
    assert edit_distance(a, b) == distance
    assert edit_distance(b, a) == distance


def test_score_counts_a_line_break_as_one_character() -> None:
    distance, chars = score("Windows Update Error", "Windows Update\nError\n")

    assert (distance, chars) == (1, 20)
