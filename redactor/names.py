"""Word lists the person recogniser consults: given names, and ordinary English words.

Given names come from the ``nomquamgender`` package, which ships counts of first names gathered
from many countries' registers (names without their accents, lower case). Its data file is read
directly, without importing the package (whose import pulls in pandas and keeps the whole table),
once per process, and only names seen in several sources and often enough are kept, so that
typos and one-off entries do not turn ordinary words into names. When the package is missing the
redactor still runs: the list is empty and only the cue-based rules find people.

Function words of the other languages users write in (German, French, Spanish, Dutch, Italian,
Portuguese: "meine", "mijn", "mon", "niet", "mich") come from spaCy's own stop-word lists, which
ship with spaCy: the English model reads "Meine Geräte-PIN" or "mon identité" as people.

Ordinary English words come from the lemmatizer tables of the spaCy model the redactor already
loads (WordNet's index of nouns, verbs, adjectives and adverbs) plus spaCy's stop words; a
capitalised word that is also an ordinary word ("Will", "Mark", "Grant", "May") is only a name
when something else says so.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import unicodedata
from collections.abc import Sequence
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
    foreign_function_words: frozenset[str] = frozenset()
    """Function words of German, French, Spanish, Dutch, Italian and Portuguese that are no
    English word and no given name ("meine", "mijn", "niet", "mon", "devez")."""

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


# Languages whose function words mark a span as a sentence, not a name.
FOREIGN_LANGUAGES: tuple[str, ...] = ("de", "fr", "es", "nl", "it", "pt")


def spacy_stop_words(language: str) -> frozenset[str]:
    """The stop words spaCy ships for ``language``, read from their own module without importing
    the language's package: ``spacy.lang.fr`` builds its tokenizer exceptions when imported, 3.7
    CPU-seconds that every redactor process (and every test process using one) paid for a list of
    words."""
    package = importlib.util.find_spec("spacy.lang")
    folders = package.submodule_search_locations if package else None
    path = Path(next(iter(folders or ["."]))) / language / "stop_words.py"
    spec = importlib.util.spec_from_file_location(f"deskpilot_spacy_stop_words_{language}", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise LookupError(f"spaCy ships no stop words for {language!r} (looked for {path})")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return frozenset(module.STOP_WORDS)


def foreign_function_words(
    english: frozenset[str], names: frozenset[str], particles: frozenset[str]
) -> frozenset[str]:
    """The stop words spaCy ships for :data:`FOREIGN_LANGUAGES`, less English words, given names
    and the particles of names ("van", "de", "del")."""
    words: set[str] = set()
    for language in FOREIGN_LANGUAGES:
        words.update(word.casefold() for word in spacy_stop_words(language))
    return frozenset(
        word
        for word in words
        if len(word) >= 2
        and word.isalpha()
        and word not in english
        and fold(word) not in names
        and word not in particles
    )


# Lower-case words that join the parts of a name ("Willemine ten Pas", "Vincent van Gogh").
NAME_PARTICLES: frozenset[str] = frozenset(
    {
        "van", "von", "de", "der", "den", "del", "della", "di", "da", "das", "do", "dos",
        "du", "la", "le", "ten", "ter", "bin", "ibn", "al", "el", "y", "zu", "af", "e", "i",
    }
)  # fmt: skip


def name_lists(nlp: Language) -> NameLists:
    """The gazetteer and ``nlp``'s vocabulary, as the person and address recognizers use them."""
    names, frequent = given_names()
    stop_words = frozenset(word.casefold() for word in nlp.Defaults.stop_words)
    english = ordinary_words(nlp)
    foreign = foreign_function_words(english, names, NAME_PARTICLES)
    return NameLists(names, frequent, english, stop_words, foreign)


# Greetings, closings and mail headers of the languages users write in: "Cheers", "Viele
# Grüße", "Sehr geehrte Damen und Herren", "Betreff", "Cordialement".
SALUTATIONS: frozenset[str] = frozenset(
    {
        "cheers", "regards", "thanks", "thank", "best", "kind", "warm", "sincerely",
        "subject", "re", "fw", "fwd", "dear", "hi", "hello", "hey", "greetings",
        "betreff", "gruß", "gruss", "grüße", "grüsse", "grüßen", "grüssen", "viele", "liebe",
        "lieber", "beste", "besten", "freundlichen", "freundliche", "mit", "sehr", "geehrte",
        "geehrter", "geehrten", "damen", "herren", "und", "hallo", "moin", "servus", "danke",
        "objet", "cordialement", "bonjour", "salut", "merci", "bien", "à", "vous",
        "asunto", "saludos", "atentamente", "hola", "gracias", "onderwerp", "groeten",
        "groet", "vriendelijke", "hartelijke", "bedankt", "oggetto", "saluti", "cordiali",
        "grazie", "ciao", "assunto", "obrigado", "obrigada", "atenciosamente", "cumprimentos",
        # greetings of the day and "please", which the model reads as names or places
        "goedemorgen", "goedemiddag", "goedenavond", "hoi", "groetjes", "doei", "bonsoir",
        "bonne", "journée", "soirée", "buenos", "buenas", "días", "tardes", "noches", "bom",
        "boa", "dia", "tarde", "noite", "olá", "buongiorno", "buonasera", "guten", "morgen",
        "tag", "abend", "grüezi", "tschüss", "bitte", "cześć", "dzień", "dobry", "hej",
        "hejsan", "tack", "god", "morgon", "moi", "kiitos", "ahoj", "díky", "merhaba",
    }
)  # fmt: skip
# Words of protocols, headers and units that the model reads as names ("Bearer eyJ...",
# "Cookie: ...", "18.4 GiB", "jdbc:postgresql").
TECHNICAL_WORDS: frozenset[str] = frozenset(
    {
        "bearer", "basic", "digest", "negotiate", "ntlm", "cookie", "uri", "url", "jdbc",
        "odbc", "ldap", "ldaps", "oauth", "saml", "krbtgt", "mongosh", "gib", "mib", "kib",
        "tib", "nmcli", "wifi",
    }
)  # fmt: skip
# The first word of a command line that the model reads as a name ("rclone config",
# "az keyvault", "npm ERR"); only in lower case ("Ping" may be someone's name).
COMMANDS: frozenset[str] = frozenset(
    {
        "git", "npm", "npx", "pip", "az", "aws", "gcloud", "kubectl", "docker", "helm",
        "rclone", "ping", "nmap", "curl", "wget", "ssh", "scp", "sftp", "rsync", "sudo", "apt",
        "yum", "dnf", "brew", "choco", "winget", "systemctl", "journalctl", "terraform",
        "ansible", "vault", "openssl", "ldapsearch", "netsh", "ipconfig", "nslookup", "dig",
        "traceroute", "tracert", "mysql", "psql", "node", "python", "java", "dotnet", "pwsh",
        "bash", "grep", "cat", "tail", "less", "vim", "nano", "make", "cargo", "go", "yarn",
        "pnpm", "composer", "gem", "mvn", "gradle", "php", "perl", "ruby", "powershell",
        "cmd", "robocopy", "xcopy", "icacls", "gpupdate", "gpresult", "dism", "sfc",
        "chkdsk", "diskpart", "bcdedit", "certutil", "klist", "whoami", "hostname", "tar",
        "zip", "unzip", "chmod", "chown", "ls", "cd", "mv", "cp", "rm", "mkdir", "echo",
        "crontab", "iptables", "ufw", "firewall-cmd", "mount", "umount", "df", "du", "top",
        "htop", "ps", "kill", "lsof", "netstat", "ss", "tcpdump", "telnet", "nc", "ncat",
    }
)  # fmt: skip
# Possessives and articles that start a phrase in another language ("mon identité"), in
# lower case ("Ma" and "Su" are names).
DETERMINERS_ABROAD: frozenset[str] = frozenset(
    {
        "mon", "ma", "mes", "ton", "ta", "tes", "son", "sa", "ses", "notre", "votre", "leur",
        "mi", "mis", "tu", "tus", "su", "sus", "mein", "meine", "dein", "sein", "mijn",
        "jouw", "zijn", "haar", "il", "lo", "gli", "le", "les", "un", "une", "des", "du",
        "au", "aux", "el", "los", "las", "der", "die", "das", "het", "een",
    }
)  # fmt: skip
# German abstract and compound nouns ("Freischaltung", "Geburtsdatum", "Elternzeit"), which
# the English model reads as names because they are capitalised.
_GERMAN_NOUN = re.compile(
    r"\w{5,}(?:ung|ungen|heit|keit|schaft|datum|zeit|nummer|konto|portal|zugang|adresse|"
    r"abteilung|leitung|stelle|code|wort|taste|buch|trieb|drucker|ordner|datei|laufwerk|"
    r"rechner|netzwerk|zugriff)$",
    re.IGNORECASE,
)


def words_of_no_name(words: Sequence[str], names: NameLists) -> bool:
    """Whether the words of a span are another language's sentence, a greeting, a closing or a
    mail header, or a command line, which no person's name is: a function word of German,
    French, Spanish, Dutch, Italian or Portuguese ("Meine", "mijn", "niet"); only greetings and
    closings ("Viele Grüße", "Cheers", "Damen"); a command first ("rclone config"); a foreign
    article or possessive first, before lower-case words or in lower case ("mon identité", "De
    verificatiecode"); a German abstract noun ("Freischaltung", "Geburtsdatum")."""
    if not words:
        return False
    folded = [word.casefold() for word in words]
    if any(word in names.foreign_function_words for word in folded):
        return True
    if all(word in SALUTATIONS for word in folded):
        return True
    if words[0] in COMMANDS or words[0] in DETERMINERS_ABROAD:
        return True
    if (
        len(words) >= 2
        and (folded[0] in DETERMINERS_ABROAD or folded[0] == "de")
        and all(word.islower() for word in words[1:])
    ):
        return True
    return any(
        word[0].isupper() and _GERMAN_NOUN.match(word) and not names.is_given_name(word)
        for word in words
    )
