"""Postal addresses in free text, in the formats people actually type, from many countries.

Presidio has no street-address recogniser and spaCy's small model tags at most the city. An
address is found here from one strong piece of evidence (a *core*), then widened over the parts
that belong with it:

* cores: a house number with a street name and a street-type word ("12 Baker Street",
  "3369 24 Clarke Avenue"); a street-type word in front of the name, as in Romance and Slavic
  languages ("Rua do Arenque 1634", "69 Av Sidi Lakhmi", "ul. Miła 53"); a compound street name
  with its number ("Puruntie 82", "Søndergade 52", "Brixtonlaan 380", "Ziegelgasse 19"); a unit
  ("Apt. 595", "Suite 501"); a post-office or military box ("P.O. Box 149", "PSC 6293, Box
  8158", "APO AE 12382"); a UK or Canadian postcode; and, right after words such as "lives at",
  "my address is" or "ship it to", any number-and-name sequence ("Kesk 53").
* widening: the street line in front of a unit or box ("20789 Allika 46" before "Suite 501"),
  the rest of the line when it holds only names, numbers and codes (", Goiânia", "CA 94043"),
  and following lines of the same kind (city, region, country, postcode), one blank line
  allowed, up to five lines; a line with a phone number, an e-mail address or prose ends it.

Words that are ordinary English ("Spring 2019") or on the allow-list ("Windows 11") never make a
street name on their own, so version strings and product names in IT text stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from presidio_analyzer import EntityRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

from redactor.names import NameLists

STREET_ADDRESS = "STREET_ADDRESS"

# Capital letters of the Latin, Greek and Cyrillic alphabets, for case-sensitive parts.
_UPPER = "".join(re.escape(c) for c in map(chr, range(0x41, 0x530)) if c.isupper())
UP = f"[{_UPPER}]"
LETTER = r"[^\W\d_]"
CAP_WORD = rf"{UP}{LETTER}*(?:[-'’]{LETTER}+)*"
ANY_WORD = rf"{LETTER}+(?:[-'’]{LETTER}+)*"
NUMBER = r"\d{1,6}[A-Za-z]?(?:[-/]\d{1,5}[A-Za-z]?)?"
_HOUSE = rf"(?<![\w.,/-]){NUMBER}"  # a number that is not part of a longer one or a version

# Street-type words after the name. Unambiguous ones in any case; words that are also ordinary
# English ("Drive", "Court", "Way") only capitalised, after a capitalised name.
_STRONG_TYPES = (
    r"street|avenue|boulevard|road|lane|terrace|crescent|highway|parkway|expressway|"
    r"freeway|plaza|square|strasse|straße|gasse|platz|allee|utca|útja|út|tér|körút|ulica|"
    r"st|ave|av|rd|ln|blvd|ct|pl|sq|hwy|pkwy|cres|str|krt|rkp|u"
)
_WEAK_TYPES = (
    r"Drive|Dr|Court|Place|Way|Close|Row|Walk|Hill|Hills|Loop|Path|Pike|Park|Point|Ridge|"
    r"View|Heights|Union|Estates|Crossing|Green|Commons|Cove|Bend|Glen|Gardens|Grove|Mews|"
    r"Circle|Trail|Alley|Forge|Forges|Junction|Meadows|Mill|Mills|Pass|Shore|Springs|"
    r"Summit|Valley|Village|Vista|Wharf|Quay|Rise|Gate|Yard|Hollow|Creek|Harbor|Harbour"
)
# Street-type words in front of the name.
_PREFIX_TYPES_ANY_CASE = (
    r"rua|rue|calle|carrer|avenida|avda|viale|vicolo|piazza|piazzale|praça|praca|largo|"
    r"strada|camino|paseo|travessa|estrada|chemin|allée|impasse|quai|ulica|ul(?=\.)|aleja|"
    r"al(?=\.)|"
    r"calea|odos|ulitsa|c/"
)
_PREFIX_TYPES_CAPITALISED = r"Via|Av|Avenue|Place|Boulevard|Bd|Plaza|Str|R"
# Endings of compound street names in Germanic, Nordic, Finnic, Dutch and Central European
# languages: "Ziegelgasse", "Søndergade", "Nybyvägen", "Koskikatu", "Brixtonlaan".
_STREET_SUFFIXES = (
    r"straße|strasse|str|gasse|weg|allee|platz|damm|ufer|steig|pfad|vej|gade|stræde|straede|"
    r"gata|gatan|vägen|väg|gränd|veien|vegen|vei|gate|gaten|stien|stræti|straeti|braut|tún|"
    r"katu|kuja|tie|polku|kaari|laan|straat|plein|gracht|kade|singel|dreef|dijk|utca|ulica|"
    r"iela|gatve|prospekt|ulitsa"
)
_UNIT_WORDS = r"apt|apartment|suite|ste|flat|unit|room|rm|floor|fl|bldg|building|block|box"
_STANDALONE_UNITS = frozenset({"apt", "apartment", "suite", "flat"})

_STREET_WITH_TYPE = re.compile(
    rf"{_HOUSE}(?:\s+{NUMBER})?\s+(?:{ANY_WORD}\s+){{0,3}}(?:(?i:{_STRONG_TYPES})\b\.?)"
    rf"|{_HOUSE}(?:\s+{NUMBER})?\s+(?:{CAP_WORD}\s+){{1,3}}(?:{_WEAK_TYPES})\b\.?"
    rf"|(?:{CAP_WORD}\s+){{1,3}}(?:{NUMBER}\s+)?(?:Street|St\.|Road|Avenue|Ave\.|Lane)"
    rf"|(?:{CAP_WORD}\s+){{1,3}}(?:{_WEAK_TYPES})\s+(?:Street|St\b\.?)"
)
_STREET_WITH_PREFIX = re.compile(
    rf"(?:{_HOUSE}\s+)?"
    rf"(?:(?i:\b(?:{_PREFIX_TYPES_ANY_CASE}))|\b(?:{_PREFIX_TYPES_CAPITALISED}))\.?\s+"
    rf"(?:{ANY_WORD}\.?\s+){{0,3}}{ANY_WORD}\.?(?:\s*,?\s*{NUMBER}\b\.?)?"
)
_COMPOUND_STREET = re.compile(
    rf"(?:{_HOUSE}\s+)?(?P<name>{UP}{LETTER}{{2,}}(?i:{_STREET_SUFFIXES}))\.?\s+{NUMBER}\b\.?"
)
_NUMBER_NAME_NUMBER = re.compile(
    rf"{_HOUSE}\s+(?P<name>{CAP_WORD}(?:\s+{CAP_WORD}){{0,2}})\s+{NUMBER}\b\.?"
)
_UNIT = re.compile(
    rf"(?i:\b(?P<unit>{_UNIT_WORDS})\b\.?\s*(?:#\s*|no\.?\s*)?\d{{1,5}}[a-z]?\b(?![.,]\d))"
)
_BOX = re.compile(
    r"(?i:\b(?:p\.?\s*o\.?|post(?:al)?\s+office)\s*box\s+\d{1,6}\b)"
    r"|(?i:\b(?:psc|cmr|unit)\s+\d{3,5},?\s+box\s+\d{3,5}\b)"
    r"|(?i:\b(?:apo|fpo|dpo)\s+(?:aa|ae|ap)\s+\d{5}\b)"
    r"|\b(?:USNS|USNV|USS|USCGC)\s+[A-Z][a-z]+\b"
)
_POSTCODE = re.compile(
    r"\b[A-Z]{1,2}\d[A-Z\d]?\s+\d[ABD-HJLNP-UW-Z]{2}\b"  # United Kingdom: "SW1A 1AA"
    r"|\b[ABCEGHJ-NPRSTVXY]\d[ABCEGHJ-NPRSTV-Z]\s\d[ABCEGHJ-NPRSTV-Z]\d\b"  # Canada: "K1A 0B6"
    r"|,\s*[A-Z]{2}\s+\d{5}(?:-\d{4})?\b"  # United States, after the city: ", CA 94043"
)
# Words that announce an address; what follows them needs only a number and a name.
_ADDRESS_CUE = re.compile(
    r"(?i:\baddress(?:es)?\b(?:\s+(?:is|was|to|with|are))?(?:\s+(?:now|currently))?\s*:?|"
    # the word in other languages, also ending a compound ("Privatadresse", "Lieferanschrift")
    r"\b\w*(?:adresse|anschrift)\b(?:\s+(?:ist|lautet|est))?\s*:?|"
    r"\b(?:direcci[óo]n|indirizzo|endere[çc]o|adres|adresa|osoite)\b(?:\s+(?:es|è|é|is|je|on))?\s*:?|"
    r"\b(?:lives?|living|located|"
    r"based|resides?|stay(?:ing)?|meet\s+me)\s+(?:at|on|in)|\b(?:ship|send|sent|deliver|"
    r"delivered|mail|post|forward|return|returned|moved?|drops?\s+you\s+off)\s+(?:it\s+|them\s+|this\s+)?"
    r"(?:to|at)|\bcorner\s+of)\s*(?:here\s+they\s+are:?)?\s*\n?\s*"
)
# A street line followed by a European postcode and a town: "Am Brunnen 7, 50667 Köln",
# "Keizersgracht 123, 1015 CJ Amsterdam".
_STREET_THEN_POSTCODE = re.compile(
    rf"(?<![\w-])(?P<name>{CAP_WORD}(?:\s+{ANY_WORD}){{0,3}})\s+{NUMBER}\s*,\s*"
    rf"(?:[A-Z]{{1,2}}-)?(?:\d{{5}}|\d{{4}}(?:\s?[A-Z]{{2}})?)\s+{CAP_WORD}"
)
# Prepositions and articles of street names ("Am Brunnen", "An der Alster", "Rue de la Paix").
_STREET_NAME_PARTICLES = frozenset(
    {
        "am", "an", "auf", "im", "in", "zum", "zur", "unter", "hinter", "vor", "bei", "der",
        "den", "dem", "die", "das", "de", "la", "le", "du", "des", "van", "het", "op", "aan",
        "del", "da", "do", "di",
    }
)  # fmt: skip
_AFTER_CUE = re.compile(
    rf"(?:{_HOUSE}\s+)?(?:{ANY_WORD}\.?\s+){{0,3}}{ANY_WORD}\.?\s*,?\s*{NUMBER}\b\.?"
    rf"|{_HOUSE}\s+(?:{ANY_WORD}\.?\s+){{0,3}}{ANY_WORD}\b"
)

# What may follow a core on its line, and what a following line may hold.
# Short words inside place names: "Črni Vrh nad Idrijo", "Villafranca del Cid".
_PLACE_PARTICLES = (
    r"nad|pod|de|du|des|del|di|da|do|dos|la|le|am|an|im|auf|bei|sur|sous|en|y|of|upon"
)
_ADDRESS_PIECE = (
    rf"(?:{CAP_WORD}\.?|(?:{_PLACE_PARTICLES})(?=[ \t]+{UP})|{UP}{{2,3}}|"
    rf"\d{{3,7}}(?:-\d{{3,4}})?|{NUMBER}|\({LETTER}+(?:\s+{LETTER}+)*\)|(?i:(?:{_UNIT_WORDS})\.?\s*#?\s*\d{{1,5}}[a-z]?))"
)
_REST_OF_LINE = re.compile(rf"(?:[ \t]*,?[ \t]*{_ADDRESS_PIECE})+")
_LINE_PREFIX = re.compile(r"[ \t]*(?:[>|?*•·-]+[ \t]*)*")
_ADDRESS_LINE = re.compile(
    rf"[ \t]*,?[ \t]*{_ADDRESS_PIECE}(?:[ \t]*,?[ \t]*{_ADDRESS_PIECE}){{0,6}}[ \t]*\.?[ \t]*$"
)
_LOWER_ADDRESS_LINE = re.compile(
    rf"[ \t]*,?[ \t]*(?:{ANY_WORD}\.?|{NUMBER})(?:[ \t]*,?[ \t]*(?:{ANY_WORD}\.?|{NUMBER}|"
    rf"\({LETTER}+(?:\s+{LETTER}+)*\))){{0,6}}[ \t]*\.?[ \t]*$"
)
_STREET_LINE_END = re.compile(
    rf"(?:{_HOUSE}\s+)?(?:(?:{ANY_WORD}\.?|{NUMBER})\s+){{0,4}}{NUMBER}\.?[ \t]*,?[ \t]*$"
    rf"|(?:{_HOUSE}\s+)(?:{CAP_WORD}\s+){{1,4}}$"
    rf"|(?:^|(?<=[\s>|?*]))\d{{1,6}}[A-Za-z]?[ \t]+$"
)
_CONTACT_WORDS = re.compile(
    r"(?i:\b(?:phone|tel|telephone|mobile|cell|fax|office|desk|e-?mail|website|www|http)\b)|@"
)
_MAX_LINES = 5


@dataclass(frozen=True)
class _Core:
    start: int
    end: int
    score: float
    standalone_unit: bool = False


class StreetAddressRecognizer(EntityRecognizer):
    """STREET_ADDRESS: see the module documentation for what is found and how it is widened."""

    def __init__(
        self,
        names: NameLists,
        allowed_words: Iterable[str] = (),
        supported_language: str = "en",
    ) -> None:
        self._names = names
        self._allowed = frozenset(word.casefold() for word in allowed_words)
        super().__init__(
            supported_entities=[STREET_ADDRESS],
            name="StreetAddressRecognizer",
            supported_language=supported_language,
        )

    def load(self) -> None:
        """Nothing to load: the patterns are compiled at import."""

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        if STREET_ADDRESS not in entities or not any(char.isdigit() for char in text):
            return []
        results = []
        for core in self._cores(text):
            start = self._widen_back(text, core)
            end = self._widen_forward(
                text, core.end, lower_case=not _has_upper(text[start : core.end])
            )
            results.append(RecognizerResult(STREET_ADDRESS, start, end, core.score))
        return results

    def _cores(self, text: str) -> list[_Core]:
        cores = [
            _Core(m.start(), _strip_end(text, m.start(), m.end()), 0.9)
            for pattern in (_STREET_WITH_TYPE, _STREET_WITH_PREFIX, _BOX, _POSTCODE)
            for m in pattern.finditer(text)
            if self._plausible(m.group())
        ]
        for match in _COMPOUND_STREET.finditer(text):
            if self._plausible_name(match.group("name")):
                cores.append(_Core(match.start(), match.end(), 0.9))
        for match in _STREET_THEN_POSTCODE.finditer(text):
            words = [
                w for w in match.group("name").split() if w.casefold() not in _STREET_NAME_PARTICLES
            ]
            if words and self._plausible_name(" ".join(words)):
                cores.append(_Core(match.start(), match.end(), 0.88))
        for match in _NUMBER_NAME_NUMBER.finditer(text):
            if self._plausible_name(match.group("name")):
                cores.append(_Core(match.start(), match.end(), 0.86))
        for match in _UNIT.finditer(text):
            unit = match.group("unit").casefold()
            if unit in _STANDALONE_UNITS and not self._product_suite(text, match.start()):
                cores.append(_Core(match.start(), match.end(), 0.9, standalone_unit=True))
        for cue in _ADDRESS_CUE.finditer(text):
            after = _AFTER_CUE.match(text, cue.end())
            if after and self._plausible(after.group()):
                cores.append(
                    _Core(after.start(), _strip_end(text, after.start(), after.end()), 0.9)
                )
        return cores

    def _plausible(self, value: str) -> bool:
        """Not only product names, version numbers and ordinary words around a number."""
        words = re.findall(LETTER + r"+", value)
        return bool(words) and not all(
            word.casefold() in self._allowed for word in words if len(word) > 1
        )

    def _plausible_name(self, name: str) -> bool:
        """A street name is no ordinary English word and no product name."""
        words = name.split()
        return not any(
            word.casefold() in self._allowed or self._names.is_ordinary_word(word) for word in words
        )

    @staticmethod
    def _product_suite(text: str, start: int) -> bool:
        """ "Office suite 2019", "the test suite 3": a software suite, not an office suite."""
        before = text[max(0, start - 20) : start].split()
        return bool(before) and before[-1].casefold() in {
            "office", "software", "test", "testing", "security", "productivity", "creative",
            "adobe", "app", "application",
        }  # fmt: skip

    def _widen_back(self, text: str, core: _Core) -> int:
        """Take in the street line in front of a unit, box or bare street name."""
        line_start = text.rfind("\n", 0, core.start) + 1
        before = text[line_start : core.start]
        match = _STREET_LINE_END.search(before)
        if match and match.start() < len(before) and self._plausible(match.group()):
            return line_start + match.start()
        prefix = _LINE_PREFIX.match(before)
        if not (core.standalone_unit and prefix and prefix.end() == len(before)):
            return core.start
        if line_start == 0:
            return core.start
        previous_start = text.rfind("\n", 0, line_start - 1) + 1
        previous = text[previous_start : line_start - 1]
        match = _STREET_LINE_END.search(previous)
        if match and self._plausible(match.group()) and not _CONTACT_WORDS.search(match.group()):
            return previous_start + match.start()
        return core.start

    def _widen_forward(self, text: str, end: int, *, lower_case: bool) -> int:
        """Take in the rest of the line and following lines that hold address parts only."""
        rest = _REST_OF_LINE.match(text, end)
        if rest and not _CONTACT_WORDS.search(rest.group()) and _digits(rest.group()) < 7:
            end = rest.end()
        line_pattern = _LOWER_ADDRESS_LINE if lower_case else _ADDRESS_LINE
        cursor, lines, blank = end, 0, False
        while lines < _MAX_LINES and cursor < len(text):
            newline = text.find("\n", cursor)
            if newline == -1 or text[cursor:newline].strip(" \t.,"):
                break
            line_start = newline + 1
            line_end = text.find("\n", line_start)
            line_end = len(text) if line_end == -1 else line_end
            line = text[line_start:line_end]
            prefix = _LINE_PREFIX.match(line)
            body_start = prefix.end() if prefix else 0
            body = line[body_start:]
            if not body.strip():
                if blank:
                    break
                blank, cursor = True, line_end
                continue
            if (
                _CONTACT_WORDS.search(body)
                or _digits(body) >= 7
                or not line_pattern.match(body)
                or len(body.split()) > 7
            ):
                break
            end = line_start + body_start + len(body.rstrip(" \t.,"))
            cursor, lines, blank = line_end, lines + 1, False
        return end


def _strip_end(text: str, start: int, end: int) -> int:
    """Trailing spaces and sentence punctuation stay outside the span."""
    while end > start and text[end - 1] in " \t\n,;:":
        end -= 1
    return end


def _has_upper(value: str) -> bool:
    return any(char.isupper() for char in value)


def _digits(value: str) -> int:
    return sum(char.isdigit() for char in value)
