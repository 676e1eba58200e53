"""spaCy's attribute ruler matched through an index of its patterns instead of its ``Matcher``.

The English pipelines' ``attribute_ruler`` maps each fine tag to its coarse tag and features
(``{"TAG": "NN"}`` gives ``POS`` ``NOUN``) and corrects a few words by their tag and spelling
(``{"TAG": "DT", "LOWER": "this"}``): 179 patterns, nearly all of one token, each naming a tag or
a word. spaCy's ``Matcher`` tries every pattern at every token, which cost a tenth of the
redactor's time on a short message (2.3 ms of a 321-character message's 28). Here each pattern
is filed under the word or the tag its first token needs, so a token is tried only against the
patterns that could start at it: the same matches, in the same order, for a fraction of the
time (``python -m redactor.tests.bench_redact`` prints the whole message's figure). Setting the
attributes is left to the ruler itself.

A ruler with a pattern this index cannot read (a quantifier ``OP``, a predicate other than
``IN``, ``NOT_IN`` and ``REGEX``, an attribute not in :data:`ATTRIBUTES`) is left as it is.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, cast

from spacy import attrs
from spacy.language import Language
from spacy.pipeline import AttributeRuler
from spacy.strings import get_string_id
from spacy.tokens import Doc

ATTRIBUTES: dict[str, int] = {
    "LOWER": attrs.LOWER,
    "ORTH": attrs.ORTH,
    "TAG": attrs.TAG,
    "DEP": attrs.DEP,
    "IS_SPACE": attrs.IS_SPACE,
}
"""The token attributes a pattern may test, read for all tokens at once by ``Doc.to_array``:
a word, tag or label as its string's hash, a flag as 0 or 1."""

Test = tuple[int, str, object]
"""One condition on a token: the attribute's column, ``eq``, ``in``, ``not_in`` (of hashes) or
``regex`` (searched in the string, as the ``Matcher`` does), the value."""


class UnreadablePatternError(ValueError):
    """A pattern uses something the index does not read; the ruler keeps its ``Matcher``."""


@dataclass(frozen=True)
class _Pattern:
    attr_id: int
    match_id: int
    tokens: tuple[tuple[Test, ...], ...]


def _value(wanted: object) -> int:
    """A pattern's value as ``Doc.to_array`` gives the token's."""
    if isinstance(wanted, bool):
        return int(wanted)
    if isinstance(wanted, str):
        return int(get_string_id(wanted))
    raise UnreadablePatternError(f"value {wanted!r}")


def _tests(spec: dict[str, Any], columns: dict[str, int]) -> tuple[Test, ...]:
    tests: list[Test] = []
    for attribute, wanted in spec.items():
        column = columns[attribute]
        if not isinstance(wanted, dict):
            tests.append((column, "eq", _value(wanted)))
            continue
        if len(wanted) != 1 or next(iter(wanted)) not in ("IN", "NOT_IN", "REGEX"):
            raise UnreadablePatternError(f"predicate {wanted!r}")
        ((operator, values),) = wanted.items()
        if operator == "REGEX":
            tests.append((column, "regex", re.compile(values)))
        else:
            tests.append((column, operator.lower(), frozenset(_value(v) for v in values)))
    return tuple(tests)


class IndexedMatch:
    """What :meth:`AttributeRuler.match` returns, found through an index of the ruler's
    patterns by a value their first token needs (a word, a tag), so that a token is tried only
    against the patterns that could start at it."""

    def __init__(self, ruler: AttributeRuler) -> None:
        self._strings = ruler.vocab.strings
        entries = cast(list[dict[str, Any]], ruler.patterns)
        used = {
            attribute
            for entry in entries
            for pattern in entry["patterns"]
            for spec in pattern
            for attribute in spec
        }
        if unknown := used - set(ATTRIBUTES):
            raise UnreadablePatternError(f"attributes {sorted(unknown)}")
        # Preferred first when a first token tests several: the most telling.
        self._attributes = [attribute for attribute in ATTRIBUTES if attribute in used]
        self._ids: list[int | str] = [ATTRIBUTES[attribute] for attribute in self._attributes]
        columns = {attribute: i for i, attribute in enumerate(self._attributes)}
        self._by: dict[tuple[int, int], list[_Pattern]] = defaultdict(list)
        self._anywhere: list[_Pattern] = []
        for attr_id, entry in enumerate(entries):
            match_id = ruler.vocab.strings.add(str(attr_id))
            for pattern in entry["patterns"]:
                if not pattern:
                    raise UnreadablePatternError("an empty pattern")
                tokens = tuple(_tests(spec, columns) for spec in pattern)
                self._file(_Pattern(attr_id, match_id, tokens))
        self._keyed = sorted({column for column, _ in self._by})

    def _file(self, pattern: _Pattern) -> None:
        """Under a value its first token must have (each value of an ``IN``), else anywhere."""
        for column, operator, wanted in sorted(pattern.tokens[0], key=lambda test: test[0]):
            if operator == "eq":
                self._by[(column, wanted)].append(pattern)  # type: ignore[index]  # an int
                return
            if operator == "in":
                for value in wanted:  # type: ignore[attr-defined]  # a frozenset
                    self._by[(column, value)].append(pattern)
                return
        self._anywhere.append(pattern)

    def _passes(self, tests: tuple[Test, ...], row: list[int]) -> bool:
        for column, operator, wanted in tests:
            value = row[column]
            if operator == "eq":
                passed = value == wanted
            elif operator == "in":
                passed = value in wanted  # type: ignore[operator]  # a frozenset
            elif operator == "not_in":
                passed = value not in wanted  # type: ignore[operator]  # a frozenset
            else:
                passed = wanted.search(self._strings[value]) is not None  # type: ignore[attr-defined]
            if not passed:
                return False
        return True

    def __call__(self, doc: Doc) -> list[tuple[int, int, int, int]]:
        if not len(doc):
            return []
        rows: list[list[int]] = doc.to_array(self._ids).tolist()
        found: set[tuple[int, int, int, int]] = set()
        for start, row in enumerate(rows):
            candidates = list(self._anywhere)
            for column in self._keyed:
                candidates += self._by.get((column, row[column]), ())
            for pattern in candidates:
                end = start + len(pattern.tokens)
                if end <= len(rows) and all(
                    self._passes(tests, rows[start + offset])
                    for offset, tests in enumerate(pattern.tokens)
                ):
                    found.add((pattern.attr_id, pattern.match_id, start, end))
        return sorted(found)


def index_attribute_ruler(nlp: Language) -> bool:
    """Have ``nlp``'s ``attribute_ruler`` match through :class:`IndexedMatch`; whether it does
    (a pipeline without one, or with a pattern the index cannot read, is left as it is)."""
    if "attribute_ruler" not in nlp.pipe_names:
        return False
    ruler = nlp.get_pipe("attribute_ruler")
    if not isinstance(ruler, AttributeRuler):
        return False
    try:
        indexed = IndexedMatch(ruler)
    except UnreadablePatternError:
        return False
    ruler.match = indexed  # type: ignore[method-assign]  # the ruler's own call uses it
    return True
