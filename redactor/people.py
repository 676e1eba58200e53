"""People's names that spaCy's small model misses: found from given-name lists and cue words.

The small English model finds "John Smith" in a well-formed sentence but misses names in lower
case, names from outside the English-speaking world, names right after "by", "with" or "to", and
names alone on a line (signatures, address blocks). This recogniser adds what a person would use:

* a **given name** from the gazetteer (:mod:`redactor.names`), with the capitalised words,
  initials and particles ("van", "de", "ten") that follow it: "Szabina J Gelencsér",
  "Willemine ten Pas". A given name that is also an ordinary English word ("Will", "Mark",
  "Grant") needs a surname that is not, or a cue; alone it is left to NER.
* **cue words** in front of a name: "my name is", "call me", "Mr.", "Dr.", "Name:" introduce
  a name whatever the word; "I'm", "this is", "hi", "thanks," introduce a capitalised word that
  is no ordinary English word; "by", "with", "to", "from", "under" introduce a full name
  (two words or more).
* **lower case**: a frequent given name that is no English word, followed by a surname-like word
  or introduced by a cue ("follow up with patricia desrosiers", "my name is vitoria").

Words on the allow-list (product and tool names) are never part of a name, so "with Outlook" or
"thanks, Teams" stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from presidio_analyzer import EntityRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts
from spacy.tokens import Token

from redactor.names import TECHNICAL_WORDS, NameLists, words_of_no_name

PERSON = "PERSON"

# A word, with inner apostrophes and hyphens ("O'Brien", "Jean-Luc"); digits never start one.
_WORD = re.compile(r"[^\W\d_][^\W_]*(?:[-'’][^\W\d_][^\W_]*)*")
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)

# Lower-case words that join the parts of a name ("Willemine ten Pas", "Vincent van Gogh").
PARTICLES: frozenset[str] = frozenset(
    {
        "van", "von", "de", "der", "den", "del", "della", "di", "da", "das", "do", "dos",
        "du", "la", "le", "ten", "ter", "bin", "ibn", "al", "el", "y", "zu", "af",
    }
)  # fmt: skip

# Cues that name whatever follows: "my name is Key", "Mr. Brown".
_NAMING_CUE = re.compile(
    r"(?:\b(?:my|his|her|their|the|your|full|first|last|middle|maiden|sur|user|display|"
    r"contact|account)\s*name(?:\s+is|\s+was|'s|\s*:|\s*\?)|\bname\s*:|\bnamed|"
    r"\bcall(?:s|ed)?\s+me|\bi\s+am\s+called|\bi'm\s+called|\bcalled|"
    r"\b(?:mr|mrs|ms|mx|miss|dr|prof|sir|madam|mme|mlle|herr|frau)\.?)"
    r"[\s.,:;!?\"'“”]*$",
    re.IGNORECASE,
)
# Cues after which a capitalised word that is no ordinary English word is a name.
_GREETING_CUE = re.compile(
    r"(?:\bi\s*am|\bi'm|\bim|\bthis\s+is|\bit's|\bit\s+is|\bhi|\bhello|\bhey|\bdear|"
    r"\bthanks|\bthank\s+you|\bregards|\bcheers|\bsincerely|\bbest|\bsigned|\bcc|\bask|"
    r"\btell|\bsaid|\basked|\bcolleague|\bmanager|\bboss|\bkid|\bson|\bdaughter|\bwife|"
    r"\bhusband|\bpartner)"
    r"[\s.,:;!?\"'“”]*$",
    re.IGNORECASE,
)
# Cues after which two capitalised words or more are a name; one word after them is as often a
# product or a network ("from Jamf", "to NW-Corp").
_PREPOSITION_CUE = re.compile(
    r"(?:\bfrom|\bby|\bwith|\bto|\bfor|\bunder|\bcontact|\bmeet)[\s.,:;!?\"'“”]*$",
    re.IGNORECASE,
)
# A word glued to a number is a model or a version ("Zephyr-9", "Surface4"), not a name.
_MODEL_NUMBER = re.compile(r"[-_/]?\d")
_LINE_WORD = r"[^\W\d_][^\W\d_'’-]+"
_NAME_LINE = re.compile(
    rf"^[ \t>|?*]*(?P<name>{_LINE_WORD}(?:[ \t]+[A-Z]\.?)?(?:[ \t]+{_LINE_WORD}){{1,2}})[ \t,]*$",
    re.MULTILINE,
)
_CUE_WINDOW = 40
_NOT_A_NAME_HYPHEN = re.compile(r"[^\W\d_]-(?:[a-z]|[A-Z]{2,}(?![a-z]))|\b[A-Z]{2,}-[^\W\d_]")
# "name:" in a configuration file ("name: grafana-admin", "  username: grafana") names a thing
# or an account, not a person, when its value is in lower case.
_CONFIG_NAME_KEY = re.compile(r"(?:^|\n)[ \t]*-?[ \t]*[\w.-]*name\s*[:=]\s*[\"']?$", re.IGNORECASE)

# Capitalised words that are given names too ("June", "August") but mostly mean a date.
CALENDAR_WORDS: frozenset[str] = frozenset(
    {
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
        "january", "february", "march", "april", "may", "june", "july", "august",
        "september", "october", "november", "december",
    }
)  # fmt: skip  # characters before a word searched for a cue


# A month's short form before a day ("Jun 02 09:14:51" at the head of a log line), though "Jun"
# is also a given name.
MONTH_ABBREVIATIONS: frozenset[str] = frozenset(
    {"jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"}
)
_DAY_AFTER = re.compile(r"\.?[ \t]+\d{1,2}\b")


@dataclass(frozen=True)
class _Word:
    text: str
    start: int
    end: int

    @property
    def capitalised(self) -> bool:
        return self.text[0].isupper()

    @property
    def initial(self) -> bool:
        return len(self.text) == 1 and self.text.isupper()

    @property
    def acronym(self) -> bool:
        """Short all-capital words ("IT", "HR", "VPN", "IBAN") are acronyms, not names."""
        return len(self.text) <= 5 and self.text.isupper() and len(self.text) > 1


def _proper_noun_starts(nlp_artifacts: NlpArtifacts | None) -> frozenset[int]:
    """Offsets of the tokens spaCy's tagger reads as proper nouns. At the start of a sentence
    the small model calls most capitalised words proper nouns ("Grant access..."), so there
    a token counts only when a verb in the third person follows ("Jacob lives..."); one that
    modifies a common noun names a thing ("the Zephyr key").

    Each token's attributes are read once into lists: reaching a token through the ``Doc``
    (``token.nbor()``, a slice of the rest) costs more than the whole rule on a short message.
    """
    doc = getattr(nlp_artifacts, "tokens", None)
    if doc is None:
        return frozenset()
    pos = [token.pos_ for token in doc]
    if "PROPN" not in pos:
        return frozenset()
    tags = [token.tag_ for token in doc]
    lower = [token.is_lower for token in doc]
    parsed = doc.has_annotation("DEP")
    starts = set()
    for i, token in enumerate(doc):
        if pos[i] != "PROPN":
            continue
        if _names_a_thing(token, parsed, pos, tags, lower):
            continue  # "the Zephyr key", "Phoenix project"
        following = tags[i + 1] if i + 1 < len(tags) else None
        if token.is_sent_start and following not in {"VBZ", "VBD"}:
            continue
        starts.add(token.idx)
    return frozenset(starts)


def _names_a_thing(
    token: Token, parsed: bool, pos: list[str], tags: list[str], lower: list[bool]
) -> bool:
    """The proper noun modifies a common noun in lower case ("the Zephyr key", "Phoenix
    project"): by the parse when the pipeline has a parser, else by the tags (the first word
    after it that is no proper noun is such a noun; the redactor runs without the parser,
    see :func:`redactor.service.build_analyzer`). ``pos``, ``tags`` and ``lower`` are the
    doc's tokens' coarse tags, fine tags and whether each is in lower case."""
    if parsed:
        return token.dep_ == "compound" and token.head.is_lower
    for i in range(token.i + 1, len(pos)):
        if pos[i] != "PROPN":
            return tags[i] in {"NN", "NNS"} and lower[i]
    return False


def _words(text: str) -> list[_Word]:
    words = []
    for match in _WORD.finditer(text):
        value, start, end = match.group(), match.start(), match.end()
        possessive = _POSSESSIVE.search(value)
        if possessive and possessive.start() > 0:
            value, end = value[: possessive.start()], start + possessive.start()
        words.append(_Word(value, start, end))
    return words


def label_or_parameter(text: str, start: int, end: int, names: NameLists) -> bool:
    """The span is a command's parameter or a variable ("-Uri", "$Server"), or the label of a
    tool's output or a header rather than someone's name: at the start of its line, before a
    colon ("Key Content   : ...", "Cookie: ...") or alone on it ("Login Succeeded", "All Key
    Protectors"), its last word an ordinary English word and none a frequent given name ("Tom
    Baker" under a closing stays a name)."""
    if start > 0 and text[start - 1] in "-$%":
        return True
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    if line_start == 0 and line_end == len(text):
        return False  # a message of one line ("Anna Schmidt")
    before = re.findall(r"[^\W\d_]+|[^\w\s>|*]", text[line_start:start])
    if not all(names.is_ordinary_word(w) and not names.is_given_name(w) for w in before):
        return False  # inside a sentence ("please call Peter Miller")
    after = text[end:line_end]
    if after.strip() and not after.lstrip(" \t").startswith(":"):
        return False
    words = re.findall(r"[^\W\d_]+", text[start:end])
    return (
        bool(words)
        and names.is_ordinary_word(words[-1])
        and not names.is_given_name(words[-1])
        and not any(names.is_common_given_name(word) for word in words)
    )


class PersonCueRecognizer(EntityRecognizer):
    """PERSON from given-name lists and cue words; see the module documentation."""

    def __init__(
        self,
        names: NameLists,
        allowed_words: Iterable[str] = (),
        supported_language: str = "en",
    ) -> None:
        self._names = names
        self._allowed = frozenset(word.casefold() for word in allowed_words)
        super().__init__(
            supported_entities=[PERSON],
            name="PersonCueRecognizer",
            supported_language=supported_language,
        )

    def load(self) -> None:
        """Nothing to load: the name lists are built before the recogniser."""

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        if PERSON not in entities:
            return []
        words = _words(text)
        proper_nouns = _proper_noun_starts(nlp_artifacts)
        results: list[RecognizerResult] = []
        index = 0
        while index < len(words):
            found = self._name_at(text, words, index, proper_nouns)
            if found is None:
                index += 1
                continue
            end, score = found
            results.append(RecognizerResult(PERSON, words[index].start, words[end - 1].end, score))
            index = end
        if "\n" in text.strip():
            results += self._name_lines(text)
        return [
            r
            for r in results
            if not self._no_name(text[r.start : r.end])
            and not label_or_parameter(text, r.start, r.end, self._names)
        ]

    def _no_name(self, span: str) -> bool:
        """Words that make no name: another language's sentence, a greeting or a closing
        (:func:`redactor.names.words_of_no_name`), or a hyphen joined to a lower-case or
        all-capital part ("grafana-admin", "HR-Portal"; "Schäfer-Lindner" stays)."""
        if _NOT_A_NAME_HYPHEN.search(span):
            return True
        words = re.findall(r"[^\W_]+", span)
        if any(word.casefold() in TECHNICAL_WORDS for word in words):
            return True  # "Bearer", "Cookie", "Uri"
        return words_of_no_name(words, self._names)

    def _name_lines(self, text: str) -> list[RecognizerResult]:
        """A line that holds only two or three capitalised words that are no English words,
        in a text of several lines: the name at the head of a signature or address block."""
        results = []
        for match in _NAME_LINE.finditer(text):
            words = [w for w in _words(match.group("name")) if not w.initial]
            if all(
                w.capitalised
                and not self._is_allowed(w)
                and not w.text.isupper()
                and not self._names.is_ordinary_word(w.text)
                for w in words
            ):
                results.append(
                    RecognizerResult(PERSON, match.start("name"), match.end("name"), 0.5)
                )
        return results

    def _name_at(
        self, text: str, words: list[_Word], index: int, proper_nouns: frozenset[int]
    ) -> tuple[int, float] | None:
        """Where a name starting at ``words[index]`` ends (exclusive) and its score, or None.

        ``proper_nouns`` are the offsets where the tagger saw a proper noun: a given name that is
        also an ordinary word ("Logan", "Florence") counts when the tagger reads it as a name.
        """
        word = words[index]
        if (
            self._is_allowed(word)
            or word.acronym
            or word.text.casefold() in PARTICLES
            or re.split(r"['’]", word.text.casefold())[0] in self._names.stop_words
            or word.text.casefold() in CALENDAR_WORDS
            or (
                word.text.casefold() in MONTH_ABBREVIATIONS
                and _DAY_AFTER.match(text, word.end) is not None
            )
        ):
            return None
        before = text[max(0, word.start - _CUE_WINDOW) : word.start]
        naming = bool(_NAMING_CUE.search(before))
        if naming and word.text.islower() and _CONFIG_NAME_KEY.search(before):
            return None
        if word.capitalised:
            end = self._extend(text, words, index, lower_case=False)
            full = end - index > 1
            ordinary = self._names.is_ordinary_word(word.text)
            given = self._names.is_given_name(word.text) and not word.initial
            rest = words[index + 1 : end]
            rest_is_unusual = any(
                w.initial or not self._names.is_ordinary_word(w.text) for w in rest
            )
            rest_is_distinctive = rest_is_unusual or any(w.start in proper_nouns for w in rest)
            if naming:
                return end, 0.8
            if _MODEL_NUMBER.match(text, words[end - 1].end):
                return None
            greeted = bool(_GREETING_CUE.search(before))
            introduced = greeted or bool(_PREPOSITION_CUE.search(before))
            if given and not ordinary and (full or len(word.text) > 2):
                return end, 0.75 if full else 0.6
            if given and full and rest_is_distinctive:
                return end, 0.7
            if (
                given
                and word.start in proper_nouns
                and (full or self._names.is_common_given_name(word.text))
            ):
                return end, 0.55
            if introduced and full and (not ordinary or rest_is_unusual):
                return end, 0.6
            if greeted and not ordinary and not word.initial and len(word.text) > 2:
                return end, 0.5
            return None
        # Lower case: only names that are not English words.
        if self._names.is_ordinary_word(word.text) or len(word.text) < 3:
            return None
        introduced = (
            naming or bool(_GREETING_CUE.search(before)) or bool(_PREPOSITION_CUE.search(before))
        )
        if len(word.text) < 4 and not introduced:
            return None
        if not (naming or self._names.is_common_given_name(word.text)):
            return None
        end = self._extend(text, words, index, lower_case=True)
        if end - index > 1 or introduced:
            return end, 0.6
        return None

    def _extend(self, text: str, words: list[_Word], index: int, *, lower_case: bool) -> int:
        """The end of the name that starts at ``words[index]``: up to four words in all, joined
        by spaces on one line (a full stop after an initial), particles inside."""
        end = index + 1
        while end < len(words) and end - index < 4:
            previous, word = words[end - 1], words[end]
            if not self._joined(text, previous, word):
                break
            if self._is_name_part(word, lower_case):
                end += 1
                continue
            if (
                word.text in PARTICLES
                and end + 1 < len(words)
                and self._joined(text, word, words[end + 1])
                and self._is_name_part(words[end + 1], lower_case)
            ):
                end += 2
                continue
            break
        return end

    @staticmethod
    def _joined(text: str, previous: _Word, word: _Word) -> bool:
        gap = text[previous.end : word.start]
        if "\n" in gap or len(gap) > 3:
            return False
        stripped = gap.strip()
        return stripped == "" or (stripped == "." and previous.initial)

    def _is_name_part(self, word: _Word, lower_case: bool) -> bool:
        if self._is_allowed(word) or word.acronym:
            return False
        if lower_case:
            return (
                word.text.islower()
                and (len(word.text) > 3 or self._names.is_given_name(word.text))
                and not self._names.is_ordinary_word(word.text)
            )
        return word.capitalised and word.text.casefold() not in self._names.stop_words

    def _is_allowed(self, word: _Word) -> bool:
        return word.text.casefold() in self._allowed
