"""Extractive composition: what gets quoted and cited, and when the assistant declines."""

from __future__ import annotations

from contracts.events import Action
from orchestrator.compose import NO_ANSWER_TEXT, choose_passage, compose_answer, snippet
from orchestrator.retrieval import Hit, Retrieval

STEPS = "1. Open the portal.\n2. Choose Change password.\n3. Save."


def hit(url: str, score: float, text: str = "Some text.", section: str = "", index: int = 0) -> Hit:
    title = url.rsplit("/", 1)[-1].replace("-", " ").capitalize()
    return Hit(
        chunk_id=f"{url}#{index}",
        text=text,
        url=url,
        title=title,
        section=section or title,
        score=score,
        chunk_index=index,
    )


def compose(hits: list[Hit], document: list[Hit] | None = None, threshold: float = 0.4):  # type: ignore[no-untyped-def]
    return compose_answer(
        Retrieval(hits, document if document is not None else hits[:1]),
        threshold=threshold,
        see_also_margin=0.08,
        max_citations=3,
    )


def test_below_threshold_is_an_honest_no_answer() -> None:
    body = compose([hit("https://kb/a", 0.2)])
    assert body.action is Action.NO_ANSWER
    assert body.answer == NO_ANSWER_TEXT
    assert body.citations == []


def test_empty_knowledge_base_is_no_answer() -> None:
    assert (
        compose_answer(
            Retrieval([], []), threshold=0.4, see_also_margin=0.1, max_citations=3
        ).action
        is Action.NO_ANSWER
    )


def test_answer_quotes_the_best_passage_and_cites_it_first() -> None:
    best = hit("https://kb/vpn-reset", 0.8, text=STEPS)
    body = compose([best, hit("https://kb/other", 0.3)])
    assert body.action is Action.ANSWER
    assert STEPS in body.answer
    assert "[1]" in body.answer
    assert [c.n for c in body.citations] == [1]
    assert body.citations[0].url == "https://kb/vpn-reset"
    assert body.citations[0].snippet.startswith("1. Open the portal.")


def test_close_articles_are_cited_as_see_also_once_each() -> None:
    hits = [
        hit("https://kb/a", 0.80, text=STEPS),
        hit("https://kb/a", 0.79, index=1),
        hit("https://kb/b", 0.76),
        hit("https://kb/c", 0.60),
    ]
    body = compose(hits)
    assert [c.url for c in body.citations] == ["https://kb/a", "https://kb/b"]
    assert "See also: B [2]." in body.answer
    assert "[3]" not in body.answer


def test_steps_are_preferred_over_a_better_matching_contact_paragraph() -> None:
    contact = hit("https://kb/a", 0.70, "Call extension 4357.", section="A > When to call", index=3)
    steps = hit("https://kb/a", 0.62, STEPS, section="A", index=0)
    variant = hit(
        "https://kb/a", 0.64, "1. Forget the saved password.", section="A > Saved", index=2
    )
    chosen = choose_passage([contact, variant, steps], margin=0.15)
    assert chosen is steps
    body = compose([contact], document=[contact, variant, steps])
    assert STEPS in body.answer
    assert "4357" not in body.answer


def test_a_much_better_subsection_with_steps_wins() -> None:
    main = hit("https://kb/a", 0.50, STEPS, section="A", index=0)
    linux = hit("https://kb/a", 0.75, "1. Run ip link.", section="A > On Linux", index=4)
    assert choose_passage([linux, main], margin=0.3) is linux
    body = compose([linux], document=[linux, main])
    assert "On Linux:" in body.answer


def test_without_steps_the_best_chunk_is_quoted() -> None:
    only = hit("https://kb/a", 0.7, "The policy says no.")
    assert choose_passage([only], margin=0.1) is only


def test_snippet_is_bounded_and_cut_on_a_word() -> None:
    text = "word " * 200
    short = snippet(text, limit=50)
    assert len(short) <= 51
    assert short.endswith("…")
    assert snippet("short text") == "short text"
