"""Numbers that identify a person, found after the words that name them, in several languages.

A passport or identity-card number and an employee number have no shape of their own (six to ten
letters and digits, four to eight digits), so they are recognised by the words written before
them: "passport", "Reisepassnummer", "numéro de passeport", "carta d'identità", "DNI"; "employee
ID", "Personalnummer", "número de colaborador". People put a few words between the word and the
number ("Reisepassnummer für die Buchung: C7FJ49K2R", "passport renewal - new number
564219037", "mi pasaporte es PAB418273"); those words may be anything on the same line but a
digit, and not words that make the phrase about something else ("ID card reader 123456").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from presidio_analyzer import EntityRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

PASSPORT = "PASSPORT"
EMPLOYEE_ID = "EMPLOYEE_ID"

_NUMBER_WORD = r"(?:[ \t]+(?:num[ée]ro|n[úu]mero|numero|nummer|number|num|no\.?|nr\.?|#|id))?"
ID_DOCUMENT_WORDS = (
    r"passports?|travel\s+document|(?:national\s+)?id(?:entity)?[\s-]card|identity\s+(?:card|"
    r"document)|national\s+id|dni|nie|cni|nif|carte\s+d'identit[ée]|pi[eè]ce\s+d'identit[ée]|"
    r"(?:num[ée]ro\s+de\s+)?passeport|(?:reise)?pass(?:-?nr\.?|nummer)|reisepass|"
    r"personalausweis(?:nummer)?|ausweis(?:-?nr\.?|nummer)?|pasaporte|"
    r"documento\s+(?:de\s+identidad|nacional\s+de\s+identidad|d'identit[àa])|c[ée]dula|"
    r"passaporto|carta\s+d'identit[àa]|paspoort(?:nummer)?|identiteitskaart|id-kaart|paszport|"
    r"dow[óo]d\s+osobisty|cart[ãa]o\s+de\s+cidad[ãa]o|passaporte"
)
EMPLOYEE_WORDS = (
    r"employee\s+(?:id|number|no\.?|nr\.?|#)|staff\s+(?:id|number|no\.?)|personnel\s+number|"
    r"badge\s+(?:id|number|no\.?)|personal(?:nummer|nr\.?)|mitarbeiter(?:nummer|-?nr\.?)|"
    r"matricule|num[ée]ro\s+(?:d'employ[ée]|de\s+matricule)|"
    r"n[úu]mero\s+de\s+(?:empleado|colaborador|funcion[áa]rio|matr[íi]cula)|matricola|"
    r"personeelsnummer|werknemersnummer|numer\s+pracownika|anst[äa]llningsnummer"
)
# Between the word and the number: words without digits and punctuation, on the same line.
_GAP = r"(?:[ \t]*(?:[^\W\d_][\w'’.-]*(?![\w'’.-])|[:#,;()\[\]—–=-]))"  # whole words only
# Words that make the phrase about a device, a form or a photo rather than a person's number.
_ABOUT_SOMETHING_ELSE = re.compile(
    r"\b(?:reader|readers|printer|scanner|photo|photos|picture|template|size|format|office|form|"
    r"field|system|portal|app|application|appointment|fee|fees|page|pages|version|model|batch|"
    r"ticket|order|request|incident|case)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Kind:
    entity: str
    words: re.Pattern[str]
    value: re.Pattern[str]
    fewest_digits: int


class NumberAfterWordsRecognizer(EntityRecognizer):
    """PASSPORT and EMPLOYEE_ID: the number after the words that name it (see the module)."""

    SCORE = 0.85

    def __init__(self, supported_language: str = "en") -> None:
        self._kinds = (
            _Kind(
                PASSPORT,
                re.compile(rf"(?<![^\W_])(?:{ID_DOCUMENT_WORDS}){_NUMBER_WORD}(?![^\W_])", re.I),
                re.compile(rf"{_GAP}{{0,8}}?[ \t]*(?P<value>[A-Z0-9]{{6,10}})(?![\w-])"),
                3,
            ),
            _Kind(
                EMPLOYEE_ID,
                re.compile(rf"(?<![^\W_])(?:{EMPLOYEE_WORDS})(?![^\W_])", re.I),
                re.compile(
                    rf"{_GAP}{{0,5}}?[ \t]*(?P<value>(?:[A-Z]{{1,4}}-?)?\d{{4,8}})(?![\w-])", re.I
                ),
                4,
            ),
        )
        super().__init__(
            supported_entities=[PASSPORT, EMPLOYEE_ID],
            supported_language=supported_language,
            name="NumberAfterWordsRecognizer",
        )

    def load(self) -> None:
        """Nothing to load: the patterns are compiled at construction."""

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        results = []
        for kind in self._kinds:
            if entities and kind.entity not in entities:
                continue
            for word in kind.words.finditer(text):
                after = kind.value.match(text, word.end())
                if after is None:
                    continue
                value = after.group("value")
                gap = text[word.end() : after.start("value")]
                if sum(c.isdigit() for c in value) < kind.fewest_digits:
                    continue
                if _ABOUT_SOMETHING_ELSE.search(gap):
                    continue
                results.append(
                    RecognizerResult(
                        kind.entity, after.start("value"), after.end("value"), self.SCORE
                    )
                )
        return results
