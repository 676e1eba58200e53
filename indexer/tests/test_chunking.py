"""Chunking respects headings, size bounds and indivisible units (steps, code)."""

from __future__ import annotations

import itertools
import re

import pytest

from indexer.chunking import Chunk, chunk_document, split_sentences
from indexer.extract import Block, ExtractedDocument, Section, extract_markdown


def _sentence(topic: str, number: int, length: int = 90) -> str:
    """A distinct sentence about ``topic`` of roughly ``length`` characters."""
    text = f"The {topic} note number {number} says"
    filler = " and more"
    while len(text) + len(filler) < length - 1:
        text += filler
    return text + "."


def _doc(*sections: Section, title: str = "Guide") -> ExtractedDocument:
    return ExtractedDocument(title=title, url="https://kb.example/guide", sections=sections)


def _paragraph(*sentences: str) -> Block:
    return Block("paragraph", " ".join(sentences))


def test_no_chunk_crosses_a_heading() -> None:
    topics = ("alpha", "bravo", "charlie")
    sections = tuple(
        Section(("Guide", topic), (_paragraph(*(_sentence(topic, n) for n in range(count))),))
        for topic, count in zip(topics, (12, 1, 5), strict=True)
    )

    chunks = chunk_document(_doc(*sections), max_chars=400, min_chars=100, overlap_sentences=1)

    assert {chunk.section_path for chunk in chunks} == {section.path for section in sections}
    for chunk in chunks:
        own_topic = chunk.section_path[-1]
        mentioned = {topic for topic in topics if f"The {topic} note" in chunk.body}
        assert mentioned == {own_topic}, chunk


def test_chunks_respect_the_size_bounds_and_lose_nothing() -> None:
    sentences = [_sentence("sizing", n, length=60 + (n * 37) % 110) for n in range(40)]
    section = Section(("Guide", "Sizing"), (_paragraph(*sentences),))

    chunks = chunk_document(_doc(section), max_chars=350, min_chars=120, overlap_sentences=1)

    assert len(chunks) > 5
    assert all(len(chunk.body) <= 350 for chunk in chunks)
    assert all(len(chunk.body) >= 120 for chunk in chunks)
    for sentence in sentences:
        assert any(sentence in chunk.body for chunk in chunks), sentence


def test_consecutive_chunks_overlap_by_the_configured_sentences() -> None:
    sentences = [_sentence("overlap", n) for n in range(20)]
    doc = _doc(Section(("Guide",), (_paragraph(*sentences),)))

    with_overlap = chunk_document(doc, max_chars=300, min_chars=50, overlap_sentences=1)
    without = chunk_document(doc, max_chars=300, min_chars=50, overlap_sentences=0)

    for previous, following in itertools.pairwise(with_overlap):
        assert following.body.startswith(split_sentences(previous.body)[-1])
    seen: set[str] = set()
    for chunk in without:
        pieces = set(split_sentences(chunk.body))
        assert not pieces & seen
        seen |= pieces


def test_steps_are_never_split() -> None:
    steps = tuple(
        Block("step", f"{n}. " + _sentence("step", n, length=110) + " Then click OK.")
        for n in range(1, 11)
    )
    doc = _doc(Section(("Guide", "Steps"), (_paragraph("Before you start, sign in."), *steps)))

    chunks = chunk_document(doc, max_chars=300, min_chars=80, overlap_sentences=1)

    step_texts = {block.text for block in steps}
    for chunk in chunks:
        for line in chunk.body.split("\n"):
            if re.match(r"^\d+\. ", line):
                assert line in step_texts, f"partial step in chunk: {line!r}"
    for step in step_texts:
        assert any(step in chunk.body.split("\n") for chunk in chunks)


def test_code_block_is_kept_whole_when_it_fits_and_split_fenced_when_it_does_not() -> None:
    small = Block("code", "```bash\nsudo systemctl restart cups\n```")
    big_lines = [f"echo line {n} of a very long generated script" for n in range(40)]
    big = Block("code", "```bash\n" + "\n".join(big_lines) + "\n```")
    doc = _doc(
        Section(("Guide", "Small"), (_paragraph("Run this."), small)),
        Section(("Guide", "Big"), (big,)),
    )

    chunks = chunk_document(doc, max_chars=400, min_chars=50, overlap_sentences=0)

    small_chunks = [c for c in chunks if c.section_path[-1] == "Small"]
    assert len(small_chunks) == 1
    assert small.text in small_chunks[0].body
    big_chunks = [c for c in chunks if c.section_path[-1] == "Big"]
    assert len(big_chunks) > 1
    for chunk in big_chunks:
        assert len(chunk.body) <= 400
        for piece in chunk.body.split("\n\n"):
            assert piece.startswith("```bash\n")
            assert piece.endswith("\n```")
    joined = "\n".join(c.body for c in big_chunks)
    assert all(line in joined for line in big_lines)


def test_a_small_tail_is_rebalanced_with_its_neighbour() -> None:
    long_one, long_two = _sentence("tail", 1, 150), _sentence("tail", 2, 120)
    short = _sentence("tail", 3, 40)
    doc = _doc(Section(("Guide",), (_paragraph(long_one, long_two, short),)))

    chunks = chunk_document(doc, max_chars=300, min_chars=100, overlap_sentences=0)

    # Greedy packing alone would give [long_one long_two] + [short] (a 40-character chunk).
    assert [chunk.body for chunk in chunks] == [long_one, f"{long_two} {short}"]


def test_a_short_section_stays_its_own_chunk() -> None:
    doc = _doc(
        Section(("Guide", "Long"), (_paragraph(*(_sentence("long", n) for n in range(6))),)),
        Section(("Guide", "Tiny"), (_paragraph("Call extension 4357."),)),
    )

    chunks = chunk_document(doc, max_chars=300, min_chars=150, overlap_sentences=1)

    assert chunks[-1].section_path == ("Guide", "Tiny")
    assert chunks[-1].body == "Call extension 4357."


def test_text_leads_with_the_section_path_and_body_is_for_display() -> None:
    doc = extract_markdown(
        "---\ntitle: Reset your VPN password\n---\n\n## On Windows\n\n1. Open the portal.\n",
        fallback_title="x",
        fallback_url="https://kb.example/vpn",
    )

    (chunk,) = chunk_document(doc, max_chars=900, min_chars=200, overlap_sentences=1)

    assert chunk.section == "Reset your VPN password > On Windows"
    assert chunk.body == "1. Open the portal."
    assert chunk.text == "Reset your VPN password > On Windows\n\n1. Open the portal."


def test_ordinals_run_through_the_document() -> None:
    sections = tuple(
        Section(("Guide", f"Part {p}"), (_paragraph(*(_sentence("ord", n) for n in range(5))),))
        for p in range(3)
    )
    chunks = chunk_document(_doc(*sections), max_chars=250, min_chars=50, overlap_sentences=0)
    assert [chunk.ordinal for chunk in chunks] == list(range(len(chunks)))
    assert all(isinstance(chunk, Chunk) for chunk in chunks)


def test_empty_document_gives_no_chunks() -> None:
    assert chunk_document(_doc(), max_chars=300, min_chars=50, overlap_sentences=1) == []


@pytest.mark.parametrize(
    ("max_chars", "min_chars", "overlap"), [(0, 0, 0), (300, 300, 1), (300, -1, 1), (300, 50, -1)]
)
def test_invalid_parameters_are_refused(max_chars: int, min_chars: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="must"):
        chunk_document(_doc(), max_chars=max_chars, min_chars=min_chars, overlap_sentences=overlap)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Open Settings. Click Save! Done? Yes.",
            ["Open Settings.", "Click Save!", "Done?", "Yes."],
        ),
        (
            "Use a strong password, e.g. Correct horse. Then save.",
            ["Use a strong password, e.g. Correct horse.", "Then save."],
        ),
        ("Version 2.5 is out. It fixes Wi-Fi.", ["Version 2.5 is out.", "It fixes Wi-Fi."]),
        ('He said "Restart it." Then it worked.', ['He said "Restart it."', "Then it worked."]),
        ("Files live in C:\\Users. see the share.", ["Files live in C:\\Users. see the share."]),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected
