"""Sufficiency: whether an article answers *this* question, or is merely similar to it.

Similarity is not an answer. "How do I set a cookie on a response?" is close to a page on CORS
middleware (both are about responses, and the page says "cookies" once); "How can I run a task
after the response has been sent?" is close to the page on responses. What the question asks
about, its *key terms*, must be what the article is about.

Without a language model, and cheaply (it runs on every turn):

* **Key terms** are the question's words as the keyword ranker reads them
  (:func:`orchestrator.retrieval.keyword_tokens`: stop words out, light stemming), less the words
  of asking ("help", "please", "way"), each weighed by its rarity in the knowledge base: its
  BM25 inverse document frequency over the collection's chunks (:class:`TermStats`). A word that
  many chunks hold ("use", "open", "set" on most sites) weighs little, and one held by more than
  :attr:`Policy.common_share` of the chunks never counts, so the "how do I" part of a question
  decides nothing; a word no chunk holds weighs most. The word after "how" that makes a
  question of amount, frequency or time ("how much", "how many", "how often", "how long") is
  the form of the question, as "how do I" is (:data:`HOW_MUCH`): such words are rare in a
  technical knowledge base, so by rarity alone "how much memory and how many CPUs" would be
  about "much" and "many". A compound ("on-call", "Wi-Fi") is one key term, covered by any of
  its forms ("call", "oncall"), not two that count twice.
* **The subject weighs, the context little.** People put context around what they ask: a
  greeting, who they are, since when, what they tried, a secret they pasted. Their words are
  rare in the knowledge base, so by rarity alone they would outweigh the question. A message is
  read in clauses (:func:`subject_and_context`): a clause that greets or introduces, says what
  was tried, or holds a redactor's placeholder (the label of a pasted value: "my password is
  <PASSWORD_1>") is *context*, unless it asks; the clauses that ask (a question mark, "how do
  I", "where") are the *subject*, else the sentences that say what is wrong ("can't", "won't",
  "keeps ...ing", "isn't"), else all. Words only
  the context or the other sentences hold, and bare numbers, weigh :attr:`Policy.context` of
  their rarity, and together at most :attr:`Policy.context_total` of the subject's
  weight; time phrases ("since this morning", "every 10 minutes", "on Tuesday") weigh
  nothing. A message with no asking sentence that names a key term is all subject, less its
  context clauses.
* **Coverage** of a term by an article: full when the article's title or the quoted section's
  heading has it, or the article's text has it :attr:`Policy.central_mentions` times; partial
  (:attr:`Policy.mention`) when the text mentions it fewer times; none otherwise. Words match
  in any close form: the Snowball English stemmer's stems are compared ("calibrate" and
  "calibration", "cookie" and "cookies"), a stem of five letters or more matches one it
  starts with up to three more ("forgot" and "forgotten", which no stemmer joins), and a
  stem matches itself with a plural "s" the stemmer keeps ("cpus" and "cpu", "vpns" and
  "vpn").
* **Sufficient** when the weighted share of the key terms covered is more than
  :attr:`Policy.min_share` (half), or the article is so similar to the question
  (:attr:`Policy.similar_enough`) that the embedding model vouches for it where words differ
  ("invisible" for "hidden"). A question with no key term left (all its words common) is
  decided by similarity alone.
* **When nothing is left to try** (no help site to read, or the turn is decided again after its
  crawl), declining means telling the user there is no answer, so an article that *stands out*
  answers too (:func:`last_resort`): its best chunk at least :attr:`Policy.standout` similar to
  the question and :attr:`Policy.standout_lead` more similar than any other document's. The
  embedding singling out one page is evidence that it is about the question where the words
  differ ("rota" for a page on schedules, "hack on it" for the development set-up page); while
  a crawl can still follow, the words decide, and a page absent from the knowledge base is
  looked for on the help sites instead of answered from a neighbour.

The key terms no similar article is about are what a crawl is planned toward
(``ContextInsufficient.focus``) and what an honest no-answer names.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from orchestrator.dialogue import PLACEHOLDER
from orchestrator.retrieval import Retrieval, TermStats, keyword_tokens, keyword_words, word_tokens

if TYPE_CHECKING:
    from orchestrator.compose import Article

ASKING_WORDS = frozenset(
    [
        "help",
        "please",
        "pls",
        "plz",
        "thank",
        "thanks",
        "way",
        "best",
        "possible",
        "need",
        "want",
        "like",
        "get",
        "got",
        "getting",
        "make",
        "know",
        "tell",
        "explain",
        "able",
        "anyone",
        "someone",
        "somebody",
        "something",
        "anything",
        "thing",
        "stuff",
        "question",
        "ask",
        "trying",
        "try",
        "tried",
        "work",
        "working",
        "issue",
        "problem",
        "hi",
        "hello",
        "hey",
        "right",
        "today",
        "currently",
        "suddenly",
        "anymore",
        "still",
        "urgent",
        "urgently",
        "asap",
        "quickly",
        "idea",
        "advice",
        "asked",
        "asking",
        "guy",
        "colleague",
        "coworker",
        "boss",
        "anyway",
        "keep",
        "since",
        "ago",
        "lately",
        "recently",
        "earlier",
        "yesterday",
        "tomorrow",
        "tonight",
        "morning",
        "afternoon",
        "evening",
        "weekend",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ]
)
"""Words of asking and of when or how urgently, not of the thing asked about ("please help,
what's the best way to ...", "right now", "urgently", "keeps", "since Tuesday"); the keyword
ranker's stop list leaves them in."""

TIME_PHRASE = re.compile(
    r"\b(?:(?:this|last|next|past|every|each)\s+(?:few\s+|couple\s+of\s+)?(?:\d+\s+)?"
    r"(?:minutes?|hours?|days?|weeks?|months?|years?|night|time)|(?:\d+|an?|one|two|three|four|"
    r"five|few|couple\s+of)\s+(?:minutes?|hours?|days?|weeks?|months?|years?)\s+ago|"
    r"\d{1,2}(?::\d{2})?\s*[ap]\.?m\.?)\b",
    re.IGNORECASE,
)
"""When it began or how often, not what: "this week", "every 10 minutes", "two days ago"
(with a number), "at 9am"."""

HOW_MUCH = re.compile(r"\bhow\s+(?:much|many|often|long|soon|frequently|far)\b", re.IGNORECASE)
"""A question of amount, frequency or time: the word after "how" asks, it is not asked about
("how many CPUs", "how often does it run")."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSE_BREAK = re.compile(r"[,;()]|\s[-\u2013\u2014]+\s")
QUESTION = re.compile(
    r"\?|\b(?:how\s+(?:do|can|could|should|to|does)|where|which|is\s+there|are\s+there)\b",
    re.IGNORECASE,
)
"""A clause that asks: a question mark, "how do I", "where is", "is there"."""
PROBLEM = re.compile(
    r"\b(?:can't|cannot|can\s+not|won't|will\s+not|isn't|is\s+not|aren't|doesn't|does\s+not|"
    r"don't|do\s+not|unable\s+to|not\s+working|keeps?\s+\w+ing)\b",
    re.IGNORECASE,
)
"""A clause that says what is wrong: "can't", "won't", "isn't", "keeps dropping"."""
GREETS = re.compile(
    r"^\W*(?:hi|hello|hey|hiya|dear|good\s+(?:morning|afternoon|evening)|thanks|thank\s+you|"
    r"thx|cheers|regards|best|kind\s+regards|many\s+thanks)\b",
    re.IGNORECASE,
)
TRIED = re.compile(
    r"\b(?:tried|already|restarted|rebooted|reinstalled|unplugged|re-?plugged|"
    r"did(?:n't|\s+not)\s+help|no\s+luck|same\s+thing)\b",
    re.IGNORECASE,
)
"""What the user did about it already: context, not what is asked."""

_NEGATION = re.compile(r"\b(\w+)[’']t\b", re.IGNORECASE)
_CONTRACTED = re.compile(r"[’'](?:m|re|ve|ll|d)\b", re.IGNORECASE)


def _expanded(text: str) -> str:
    """Contractions undone ("isn't" -> "is not", "can't" -> "can not", "I'm" -> "I"), so their
    parts fall to the stop list instead of making a word ("isnt", "im") no page has."""

    def spelt(match: re.Match[str]) -> str:
        word = match.group(1)
        irregular = {"can": "can", "won": "will", "shan": "shall"}.get(word.lower())
        return f"{irregular or word.removesuffix('n')} not"

    return _CONTRACTED.sub("", _NEGATION.sub(spelt, text))


@lru_cache(maxsize=1)
def _stemmer() -> object:
    import Stemmer

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball (Porter 2) English stem of a word, for matching close forms."""
    return str(_stemmer().stemWord(word))  # type: ignore[attr-defined]


CLOSE_PREFIX = 5
"""Letters a stem must have to match a longer stem it starts ("forgot", "forgotten")."""
CLOSE_EXTRA = 3
"""Letters the longer stem may have beyond it ("print", "printer"; not "task", "taskbar")."""


PLURAL_MIN = 3
"""Letters a stem must have to match itself with an "s" added ("cpu", "cpus")."""


def close_forms(one: str, other: str) -> bool:
    """Whether two stems are forms of one word: equal, the longer the shorter (of at least
    :data:`PLURAL_MIN` letters) with an "s" (the stemmer keeps it after "u" and after a
    consonant-only stem: "cpus", "vpns"), or the shorter (of at least :data:`CLOSE_PREFIX`
    letters) starts the longer, which has at most :data:`CLOSE_EXTRA` more. The stemmer leaves
    irregular forms apart ("forgot", "forgotten")."""
    if one == other:
        return True
    short, long = sorted((one, other), key=len)
    if len(short) >= PLURAL_MIN and long == short + "s":
        return True
    return (
        len(short) >= CLOSE_PREFIX
        and len(long) - len(short) <= CLOSE_EXTRA
        and (long.startswith(short))
    )


def stems(text: str) -> list[str]:
    """The stems of ``text``'s keyword tokens, in order, repeats kept."""
    return [stem(token) for token in keyword_tokens(text)]


@dataclass(frozen=True, slots=True)
class Policy:
    """How much of a question an article must cover (see the module's description).

    The defaults were chosen on the GNOME help development queries (``deskpilot eval
    retrieval --answers``): the most questions whose page is absent declined for the fewest
    questions whose page is there left unanswered.
    """

    common_share: float = 0.2
    """A word held by more than this share of the knowledge base's chunks never counts."""
    central_mentions: int = 2
    """Mentions in the article's text that make a term what it is about."""
    mention: float = 0.5
    """Coverage of a term the text mentions fewer times (in passing)."""
    min_share: float = 0.5
    """Weighted share of the key terms an article must cover more than."""
    context: float = 0.25
    """Weight, as a share of its rarity, of a word only a message's context holds (a greeting,
    an introduction, what was tried, a pasted value's label, a sentence that does not ask)."""
    context_total: float = 0.25
    """Most the context's words weigh together, as a share of the subject's words' weight: a
    long story around a short question ("user j.smith, pw: ..., it says locked after I typed
    it wrong. can you unlock my account?") does not outweigh it."""
    similar_enough: float = 0.65
    """Cosine similarity at which an article answers whatever words it uses: the embedding
    model knows synonyms ("invisible" for "hidden") that words alone do not."""
    standout: float = 0.55
    """Cosine similarity from which an article that stands out among those found answers when
    nothing is left to try (:func:`last_resort`)."""
    standout_lead: float = 0.12
    """How much more similar than any other document's chunk such an article's best chunk
    must be."""


DEFAULT_POLICY = Policy()


@dataclass(frozen=True, slots=True)
class KeyTerm:
    """A word of the question and its weight (its rarity in the knowledge base)."""

    word: str
    stem: str
    weight: float
    forms: tuple[str, ...] = ()
    """Other stems of the same written word that cover it too: a compound's parts and joined
    form ("on-call": "call" beside "oncall", its ``word``)."""


def _is_context(clause: str) -> bool:
    """Whether a clause only frames the question: it greets, introduces, says what was tried
    or holds a pasted value (a placeholder), and does not ask."""
    framing = GREETS.search(clause) or TRIED.search(clause) or PLACEHOLDER.search(clause)
    return bool(framing) and not QUESTION.search(clause) and not PROBLEM.search(_expanded(clause))


def _word_forms(text: str) -> list[tuple[str, ...]]:
    """The words of ``text`` that may be key terms (placeholders and time phrases out), each as
    the keyword tokens it gives: one, or a compound's parts and joined form."""
    text = HOW_MUCH.sub(" ", TIME_PHRASE.sub(" ", _expanded(PLACEHOLDER.sub(" ", text))))
    found = []
    for word in keyword_words(text):
        forms = tuple(w for w in word_tokens(word) if w not in ASKING_WORDS and len(w) >= 2)
        if forms:
            found.append(forms)
    return found


def _words(text: str) -> list[str]:
    """The keyword tokens of ``text`` that may be key terms (see :func:`_word_forms`)."""
    return [token for forms in _word_forms(text) for token in forms]


def subject_and_context(message: str) -> tuple[str, str]:
    """The part of ``message`` that says what is asked, and the rest (see the module's
    description): its clauses that ask, else its sentences that say what is wrong, else all,
    each time only if they name a key term, less greetings, introductions, tries and pasted
    values. A description that says what is wrong in passing ("make a file invisible, so you
    cannot see it") is one sentence: it stays whole."""
    sentences = [
        [clause for clause in _CLAUSE_BREAK.split(sentence) if clause.strip()]
        for sentence in _SENTENCE_END.split(message)
    ]
    clauses = [clause for sentence in sentences for clause in sentence]
    kept = [clause for clause in clauses if not _is_context(clause)]
    wrong = [s for s in sentences if any(PROBLEM.search(_expanded(clause)) for clause in s)]
    for tier in (
        [clause for clause in kept if QUESTION.search(clause)],
        [clause for sentence in wrong for clause in sentence if clause in kept],
        kept,
    ):
        if tier == clauses:
            break
        if any(_words(clause) for clause in tier):
            return " ".join(tier), " ".join(c for c in clauses if c not in tier)
    return message, ""


def key_terms(
    question: str, terms: TermStats | None, policy: Policy = DEFAULT_POLICY
) -> list[KeyTerm]:
    """The question's key terms, heaviest first, each weighed by its rarity (1 without
    statistics), by :attr:`Policy.context` of it when only the message's context holds it or
    it is a bare number, the context's together at most :attr:`Policy.context_total` of the
    subject's. The redactor's placeholders (``<EMAIL_ADDRESS_1>``) and time phrases
    are not what the question is about."""
    subject, context = subject_and_context(question)
    in_subject = {stem(word) for word in _words(subject) if not word.isdigit()}
    found: dict[str, KeyTerm] = {}
    for forms in _word_forms(subject) + _word_forms(context):
        weighed: list[tuple[float, str]] = []
        for word in forms:
            if terms is not None and terms.chunks:
                if terms.holding.get(word, 0) > policy.common_share * terms.chunks:
                    continue
                weight = terms.idf(word)
            else:
                weight = 1.0
            if stem(word) not in in_subject:
                weight *= policy.context
            weighed.append((weight, word))
        if not weighed:
            continue
        # A compound is named by its joined form ("oncall", "wifi"; the last token), weighed
        # by its heaviest form.
        weight, word = max(pair[0] for pair in weighed), weighed[-1][1]
        key = stem(word)
        others = tuple(dict.fromkeys(stem(form) for form in forms if stem(form) != key))
        if key not in found or found[key].weight < weight:
            found[key] = KeyTerm(word, key, weight, others)
    subject_weight = sum(t.weight for t in found.values() if t.stem in in_subject)
    context_weight = sum(t.weight for t in found.values() if t.stem not in in_subject)
    if context_weight > policy.context_total * subject_weight:
        # A long story around a short question weighs a bounded share of it; around a question
        # of common words only (no key term: similarity decides), nothing.
        scale = policy.context_total * subject_weight / context_weight
        found = {
            key: term
            if key in in_subject
            else KeyTerm(term.word, key, term.weight * scale, term.forms)
            for key, term in found.items()
            if key in in_subject or scale
        }
    return sorted(found.values(), key=lambda term: (-term.weight, term.word))


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether an article answers the question, and which key terms it lacks."""

    sufficient: bool
    share: float
    """Weighted share of the key terms covered (1 when the question has none)."""
    covered: tuple[str, ...]
    """Key terms the article is about (in its title or heading, or repeated in its text)."""
    missing: tuple[str, ...]
    """Key terms it is not about (absent, or mentioned in passing), heaviest first."""
    terms: tuple[KeyTerm, ...] = ()
    lead: float | None = None
    """How much more similar than any other document the article is, when it answers by
    standing out (:func:`last_resort`) rather than by its words."""

    @property
    def reason(self) -> str:
        if not self.terms:
            return "no key term to check"
        state = "answers" if self.sufficient else "does not answer"
        missing = f"; missing {', '.join(self.missing)}" if self.missing else ""
        standing = f", stands out by {self.lead:.2f} similarity" if self.lead is not None else ""
        return f"{state} the question (key terms covered {self.share:.2f}{missing}{standing})"


def judge(
    terms: Sequence[KeyTerm],
    heading: str,
    texts: Iterable[str],
    policy: Policy = DEFAULT_POLICY,
    similarity: float = 0.0,
) -> Verdict:
    """Whether a page with ``heading`` (title and section) and body ``texts``, ``similarity``
    similar to the question, covers ``terms``."""
    if not terms:
        return Verdict(True, 1.0, (), (), ())
    in_heading = set(stems(heading))
    in_text = Counter(s for text in texts for s in stems(text))
    coverage = {}
    for term in terms:
        forms = (term.stem, *term.forms)
        mentions = max(
            sum(n for found, n in in_text.items() if close_forms(form, found)) for form in forms
        )
        headed = any(close_forms(form, found) for form in forms for found in in_heading)
        if headed or mentions >= policy.central_mentions:
            coverage[term.stem] = 1.0
        elif mentions:
            coverage[term.stem] = policy.mention
        else:
            coverage[term.stem] = 0.0
    total = sum(term.weight for term in terms)
    share = sum(term.weight * coverage[term.stem] for term in terms) / total if total else 1.0
    return Verdict(
        sufficient=share > policy.min_share or similarity >= policy.similar_enough,
        share=share,
        covered=tuple(t.word for t in terms if coverage[t.stem] == 1.0),
        missing=tuple(t.word for t in terms if coverage[t.stem] < 1.0),
        terms=tuple(terms),
    )


def judge_article(
    question: str,
    article: Article,
    terms: TermStats | None,
    os: str | None = None,
    policy: Policy = DEFAULT_POLICY,
) -> Verdict:
    """Whether ``article`` answers ``question``: its title, the heading of the passage an
    answer would quote, the text of its retrieved chunks, and its best chunk's similarity."""
    passage = article.passage(os)
    heading = f"{article.title}\n{passage.section}"
    texts = {hit.chunk_id: hit.text for hit in article.chunks}
    texts[passage.chunk_id] = passage.text
    terms_asked = key_terms(question, terms, policy)
    return judge(terms_asked, heading, texts.values(), policy, article.best.score)


def lead(article: Article, retrieval: Retrieval) -> float:
    """How much more similar to the question ``article``'s best chunk is than every other
    document's retrieved chunks (its whole similarity when no other document was found)."""
    others = [hit.score for hit in retrieval.hits if hit.url != article.url]
    fetched = [*retrieval.documents.values(), retrieval.best_document]
    others += [hit.score for hits in fetched for hit in hits if hit.url != article.url]
    return article.best.score - max(others, default=0.0)


def last_resort(
    verdict: Verdict, article: Article, retrieval: Retrieval, policy: Policy = DEFAULT_POLICY
) -> Verdict:
    """``verdict`` for a turn where a decline is final (no crawl can follow): an article the
    words do not vouch for answers still when it stands out, at least :attr:`Policy.standout`
    similar and :attr:`Policy.standout_lead` ahead of every other document found."""
    if verdict.sufficient or article.best.score < policy.standout:
        return verdict
    ahead = lead(article, retrieval)
    if ahead < policy.standout_lead:
        return verdict
    return replace(verdict, sufficient=True, lead=ahead)
