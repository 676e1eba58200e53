"""The link planner's order: relevance to the question, novelty, depth; BFS without a question."""

from __future__ import annotations

from collections.abc import Sequence

from crawler.planner import Candidate, LinkPlanner, terms
from crawler.urls import url_pattern


def candidate(url: str, anchor: str, context: str = "", depth: int = 1) -> Candidate:
    return Candidate(url, anchor, context, depth, url_pattern(url))


LINKS = [
    candidate("https://h.example/printing", "Printing", "Add the office printer"),
    candidate("https://h.example/vpn/password-reset", "Reset your VPN password", "VPN access"),
    candidate("https://h.example/email", "Email", "Mailbox quota"),
    candidate("https://h.example/remote", "Remote access", "Working from home over the VPN"),
]


def test_keywords_alone_rank_the_matching_link_first() -> None:
    planned = LinkPlanner(None).plan("How do I reset my VPN password?", LINKS, [0] * len(LINKS))
    assert planned[0].candidate.anchor == "Reset your VPN password"
    assert planned[1].candidate.anchor == "Remote access"  # "VPN" in the surrounding text
    assert "password" in planned[0].reason
    assert "vpn" in planned[0].reason


def test_without_a_question_the_order_is_breadth_first() -> None:
    links = [candidate("https://h.example/deep", "Deep", depth=3), *LINKS]
    planned = LinkPlanner(None).plan("", links, [0] * len(links))
    assert [p.candidate.depth for p in planned] == [1, 1, 1, 1, 3]
    assert [p.candidate.anchor for p in planned][:4] == [c.anchor for c in LINKS]


def test_novelty_pushes_down_links_of_a_pattern_seen_often() -> None:
    days = [
        candidate(f"https://h.example/calendar/2031/{m:02d}", f"Month {m}") for m in range(1, 6)
    ]
    article = candidate("https://h.example/articles/vpn", "Month planning for VPN")
    planned = LinkPlanner(None).plan("vpn month", [*days, article], [6] * 5 + [0])
    assert planned[0].candidate is article
    assert planned[-1].novelty < planned[0].novelty


def test_depth_costs_a_little() -> None:
    near = candidate("https://h.example/a/vpn", "VPN", depth=1)
    far = candidate("https://h.example/b/vpn", "VPN", depth=4)
    planned = LinkPlanner(None).plan("vpn", [far, near], [0, 0])
    assert planned[0].candidate is near


class FakeEncoder:
    """Vectors that make 'remote' close to the question, whatever the words say."""

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] if i == 0 or "Remote" in t else [0.0, 1.0] for i, t in enumerate(texts)]


def test_similarity_counts_when_an_encoder_is_given() -> None:
    planned = LinkPlanner(FakeEncoder()).plan("working offsite", LINKS, [0] * len(LINKS))
    assert planned[0].candidate.anchor == "Remote access"
    assert planned[0].similarity == 1.0


def test_terms_drop_stopwords_and_fold_plurals() -> None:
    assert terms("How do I add printers to my laptop?") == {"add", "printer", "laptop"}


TASK_LINKS = [
    candidate("https://docs.example/responses", "Responses", "What is sent after your function"),
    candidate("https://docs.example/background-tasks", "Background tasks", "Work after returning"),
]
TASK_QUESTION = "How can I run a task after the response has been sent?"


def test_the_focus_words_lead_the_plan() -> None:
    """Both links share one word with the question; the one naming what no article of the
    knowledge base is about ("task") is read first, and it is listed in the shortlist first."""
    plain = LinkPlanner(None).plan(TASK_QUESTION, TASK_LINKS, [0, 0])
    focused = LinkPlanner(None).plan(TASK_QUESTION, TASK_LINKS, [0, 0], focus=["task"])
    assert plain[0].candidate.anchor == "Responses"  # page order decides a tie
    assert focused[0].candidate.anchor == "Background tasks"
    assert focused[0].keywords > plain[1].keywords
    shortlisted = LinkPlanner(None).shortlist(TASK_QUESTION, TASK_LINKS, 1, focus=["tasks"])
    assert [c.anchor for c in shortlisted] == ["Background tasks"]


def test_focus_words_alone_or_odd_still_plan() -> None:
    assert LinkPlanner(None).plan("", TASK_LINKS, [0, 0], focus=["task"])[0].keywords > 0
    for odd in ([""], ["???"], ["a" * 500]):
        assert len(LinkPlanner(None).plan(TASK_QUESTION, TASK_LINKS, [0, 0], focus=odd)) == 2
