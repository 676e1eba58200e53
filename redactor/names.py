"""Word lists the person recogniser consults: given names, and ordinary English words.

Given names come from the ``nomquamgender`` package, which ships counts of first names gathered
from many countries' registers (names without their accents, lower case). Its data file is read
directly, without importing the package (whose import pulls in pandas and keeps the whole table),
once per process, and only names seen in several sources and often enough are kept, so that
typos and one-off entries do not turn ordinary words into names. When the package is missing the
redactor still runs: the list is empty and only the cue-based rules find people.

Ordinary English words come from the lemmatizer tables of the spaCy model the redactor already
loads (WordNet's index of nouns, verbs, adjectives and adverbs) plus spaCy's stop words; a
capitalised word that is also an ordinary word ("Will", "Mark", "Grant", "May") is only a name
when something else says so.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from spacy.language import Language

logger = logging.getLogger(__name__)

# A name must appear in this many of the package's sources and this many times in all...
MIN_SOURCES = 8
MIN_COUNT = 100
# ...and, to be trusted in lower-case text with no other cue, many more times.
MIN_SOURCES_LOWER_CASE = 10
MIN_COUNT_LOWER_CASE = 2000


def fold(word: str) -> str:
    """Lower case without accents, as the gazetteer stores names ("Csanád" -> "csanad")."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


# Endings stripped (and what replaces them) to find the dictionary form of a word.
_INFLECTIONS: tuple[tuple[str, str], ...] = (
    ("s", ""), ("es", ""), ("ies", "y"), ("ed", ""), ("ed", "e"), ("ied", "y"), ("ing", ""),
    ("ing", "e"), ("er", ""), ("er", "e"), ("ers", ""), ("ers", "e"), ("ly", ""), ("'s", ""),
)  # fmt: skip


@dataclass(frozen=True)
class NameLists:
    """Given names (folded) at two levels of confidence, and the model's ordinary words."""

    given_names: frozenset[str]
    common_given_names: frozenset[str]
    """The subset seen often enough to count as a name in lower-case text."""
    ordinary_words: frozenset[str]
    stop_words: frozenset[str] = frozenset()
    """Function words ("the", "and", "please"), which never continue a name even capitalised."""

    def is_given_name(self, word: str) -> bool:
        return fold(word) in self.given_names

    def is_common_given_name(self, word: str) -> bool:
        return fold(word) in self.common_given_names

    def is_ordinary_word(self, word: str) -> bool:
        """An English word or an inflection of one ("users", "tried", "logging")."""
        folded = word.casefold()
        if folded in self.ordinary_words:
            return True
        return any(
            folded.endswith(suffix) and folded[: -len(suffix)] + base in self.ordinary_words
            for suffix, base in _INFLECTIONS
            if len(folded) > len(suffix) + 2
        )


@lru_cache(maxsize=1)
def given_names() -> tuple[frozenset[str], frozenset[str]]:
    """The gazetteer's names and its frequent ones; both empty when the package is missing."""
    spec = importlib.util.find_spec("nomquamgender")
    locations = list(spec.submodule_search_locations or []) if spec else []
    data_file = Path(locations[0]) / "name_data.json" if locations else None
    if data_file is None or not data_file.is_file():
        logger.warning("name gazetteer not installed: people are found by cues and NER only")
        return frozenset(), frozenset()
    table: dict[str, list[object]] = json.loads(data_file.read_text(encoding="utf-8"))
    names: set[str] = set()
    frequent: set[str] = set()
    for name, row in table.items():
        sources, count = row[0], row[1]
        if not (name.isalpha() and len(name) >= 2):
            continue
        if not (isinstance(sources, int) and isinstance(count, int)):
            continue
        if sources >= MIN_SOURCES and count >= MIN_COUNT:
            names.add(name)
            if sources >= MIN_SOURCES_LOWER_CASE and count >= MIN_COUNT_LOWER_CASE:
                frequent.add(name)
    logger.info("name gazetteer loaded: %d names, %d frequent", len(names), len(frequent))
    return frozenset(names), frozenset(frequent)


def ordinary_words(nlp: Language) -> frozenset[str]:
    """Lower-case English words known to ``nlp``'s lemmatizer tables, plus its stop words."""
    words: set[str] = {word.casefold() for word in nlp.Defaults.stop_words}
    if "lemmatizer" in nlp.pipe_names:
        lookups = getattr(nlp.get_pipe("lemmatizer"), "lookups", None)
        if lookups is not None and lookups.has_table("lemma_index"):
            for entries in lookups.get_table("lemma_index").values():
                words.update(str(entry).casefold() for entry in entries if "_" not in entry)
        if lookups is not None and lookups.has_table("lemma_exc"):
            for exceptions in lookups.get_table("lemma_exc").values():
                words.update(str(form).casefold() for form in exceptions)
    return frozenset(words)


def name_lists(nlp: Language) -> NameLists:
    """The gazetteer and ``nlp``'s vocabulary, as the person and address recognizers use them."""
    names, frequent = given_names()
    stop_words = frozenset(word.casefold() for word in nlp.Defaults.stop_words)
    return NameLists(names, frequent, ordinary_words(nlp), stop_words)
