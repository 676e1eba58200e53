"""Extractive composition: what gets quoted and cited, and when the assistant declines."""

from __future__ import annotations

from contracts.events import Action
from orchestrator.compose import (
    NO_ANSWER_TEXT,
    Article,
    checklist_steps,
    choose_passage,
    cite_lines,
    compose_answer,
    compose_checklist,
    condensed,
    os_sections,
    snippet,
    steps_of,
    whole_section,
)
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
    for step in STEPS.splitlines():
        assert f"{step} [1]" in body.answer  # every step verbatim, each with its citation
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
    assert "2. Choose Change password. [1]" in body.answer
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


def test_the_users_os_section_is_preferred() -> None:
    main = hit("https://kb/a", 0.60, STEPS, section="A", index=0)
    mac = hit("https://kb/a", 0.62, "1. Open System Settings.", section="A > On macOS", index=1)
    linux = hit("https://kb/a", 0.55, "1. Run ip link.", section="A > On Linux", index=2)
    assert choose_passage([mac, main, linux], margin=0.15, os="linux") is linux
    assert choose_passage([mac, main, linux], margin=0.15, os="macos") is mac
    assert os_sections([mac, main, linux]) == {"macos", "linux"}


def test_code_blocks_stay_verbatim_and_uncited() -> None:
    text = "1. Open a terminal.\n```\nip link show\n```\n2. Read the address."
    cited = cite_lines(text, "[1]")
    assert "ip link show\n" in cited
    assert "ip link show [1]" not in cited
    assert steps_of(text) == ["Open a terminal.\n```\nip link show\n```", "Read the address."]


def test_technical_users_get_only_steps_and_commands() -> None:
    text = "Some background that explains things.\n\n" + STEPS
    assert condensed(text) == STEPS
    best = hit("https://kb/a", 0.8, text=text)
    body = compose_answer(
        Retrieval([best], [best]),
        threshold=0.4,
        see_also_margin=0.1,
        max_citations=3,
        technical=True,
    )
    assert "background" not in body.answer


def test_checklist_offers_one_step_with_its_citation() -> None:
    source = hit("https://kb/a", 0.8, text=STEPS)
    article = Article((source,))
    passage = article.passage()
    body = compose_checklist(article, passage, checklist_steps(passage))
    assert body.action is Action.CHECKLIST
    assert body.checklist is not None
    assert body.checklist.current == 0
    assert body.checklist.steps == ["Open the portal.", "Choose Change password.", "Save."]
    assert "Step 1 of 3: Open the portal. [1]" in body.answer
    assert body.citations[0].url == "https://kb/a"


def test_a_procedure_split_across_chunks_is_quoted_whole() -> None:
    first = hit("https://kb/m", 0.60, "Intro.\n1. Ask your manager.\n2. Fill in the form.", index=0)
    second = hit("https://kb/m", 0.63, "2. Fill in the form.\n3. Wait for delivery.", index=1)
    other = hit("https://kb/m", 0.50, "1. Unrelated.", section="M > Elsewhere", index=2)
    whole = whole_section([second, first, other], second)
    assert steps_of(whole.text) == ["Ask your manager.", "Fill in the form.", "Wait for delivery."]
    assert whole.chunk_index == 0
    assert whole_section([other], other) is other


def test_the_users_os_section_is_added_to_general_steps() -> None:
    main = hit("https://kb/a", 0.60, STEPS, section="A", index=0)
    linux = hit("https://kb/a", 0.58, "```\nip link\n```", section="A > On Linux", index=2)
    mac = hit("https://kb/a", 0.59, "```\nifconfig\n```", section="A > On macOS", index=1)
    body = compose_answer(
        Retrieval([main], [main, mac, linux]),
        threshold=0.4,
        see_also_margin=0.1,
        max_citations=3,
        os="linux",
    )
    assert "On Linux:" in body.answer
    assert "ip link" in body.answer
    assert "ifconfig" not in body.answer
