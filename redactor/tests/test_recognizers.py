"""Street addresses, people found by name lists and cue words, phone words: what is replaced and
what IT text keeps.

Tests of the person rules use a small name list of their own, so they do not depend on the
gazetteer package; tests through the whole redactor use whatever is installed.
"""

from __future__ import annotations

import pytest
from presidio_analyzer import AnalyzerEngine, PatternRecognizer

from redactor import names as names_module
from redactor.names import NameLists, fold, given_names
from redactor.people import PersonCueRecognizer
from redactor.recognizers import LOOSE_EMAIL_PATTERNS, VocabularyCheckedSpacyRecognizer
from redactor.service import Redactor

# ------------------------------------------------------------------------------------------------
# Street addresses


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Please ship the new laptop to 42 Elm Street, Springfield, IL 62704 by Friday",
            "Please ship the new laptop to <STREET_ADDRESS_1> by Friday",
        ),
        (
            "I moved, my address is now 1600 Pennsylvania Ave NW",
            "I moved, my address is now <STREET_ADDRESS_1>",
        ),
        ("Send the token to Hauptstraße 5 please", "Send the token to <STREET_ADDRESS_1> please"),
        ("I'm at Rua Augusta 274 today", "I'm at <STREET_ADDRESS_1> today"),
        ("Deliver it to P.O. Box 7731", "Deliver it to <STREET_ADDRESS_1>"),
        ("the headset goes to Apt. 4B", "the headset goes to <STREET_ADDRESS_1>"),
        ("Office: 10 Downing Street, London SW1A 2AA", "Office: <STREET_ADDRESS_1>"),
    ],
)
def test_street_address_is_replaced(redactor: Redactor, text: str, expected: str) -> None:
    assert redactor.redact(text).text == expected


def test_multi_line_address_block_is_one_span(redactor: Redactor) -> None:
    text = "Ship to:\n77 Kastanienweg 12\nSuite 300\nMünster\nGermany 48149\nPhone: 0251 998 1234"

    redaction = redactor.redact(text)

    assert redaction.text.startswith("Ship to:\n<STREET_ADDRESS_1>\nPhone: ")
    assert "Münster" not in redaction.text
    assert "48149" not in redaction.text


def test_unit_line_takes_the_street_line_above_it(redactor: Redactor) -> None:
    redaction = redactor.redact("Kowalski\n\n318 Lipowa 14\nApt. 9\nKraków")

    assert "Lipowa" not in redaction.text
    assert "<STREET_ADDRESS_1>" in redaction.text


@pytest.mark.parametrize(
    "text",
    [
        "Upgrade to Windows 11 build 22631 fails with 0x800f0922",
        "Our Office suite 2019 licence expired",
        "Port 443 is blocked on 10 servers since Spring 2023",
        "sudo apt 2.4 cannot fetch the package list",
        "The C drive has 2 TB free but Outlook 365 says the disk is full",
        "Room 204 projector does not turn on",
        "Ticket 4512: replace 3 keyboards on floor 2",
    ],
)
def test_it_text_with_numbers_is_not_an_address(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text).summary().get("STREET_ADDRESS") is None


# ------------------------------------------------------------------------------------------------
# People


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My name is Zdeněk and my VPN drops", "My name is <PERSON_1> and my VPN drops"),
        ("Mr. Okonkwo cannot print", "Mr. <PERSON_1> cannot print"),
        (
            "The laptop was set up by Aino K. Virtanen last week",
            "The laptop was set up by <PERSON_1> last week",
        ),
        ("Thanks,\nMaria", "Thanks,\n<PERSON_1>"),
    ],
)
def test_person_after_a_cue_is_replaced(redactor: Redactor, text: str, expected: str) -> None:
    assert redactor.redact(text).text == expected


@pytest.mark.parametrize(
    "text",
    [
        "Will you reset my password?",
        "Mark the ticket as done",
        "Grant access to SharePoint for the sales team",
        "I'm unable to sign in from Teams",
        "Please log queue and assign to the wireless mouse team",
        "My IBAN changed, where do I update it?",
        "The Big Picture dashboard is empty on Monday",
        "sync with Outlook and Teams fails with OneDrive",
        "My Dell Latitude won't charge, the Lenovo dock works though.",
        "Chrome Remote Desktop fails with error code 0x0000.",
        "Alexa and Siri are blocked on the guest Wi-Fi",
        "He sits in Building 4, Floor 2.",
    ],
)
def test_it_text_has_no_person(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text).summary().get("PERSON") is None


_ORDINARY = (
    "will mark the ticket as done log queue with follow up in a week wireless mouse logan user "
    "my latitude floor smith"
)


class _Words(NameLists):
    """A name list with a few given names and English words, for the rules alone."""

    def __init__(self) -> None:
        super().__init__(
            given_names=frozenset({"ingrid", "patricia", "will", "mark", "csanad", "logan"}),
            common_given_names=frozenset({"patricia", "will", "mark"}),
            ordinary_words=frozenset(_ORDINARY.split()),
            stop_words=frozenset({"the", "as", "with", "up", "in", "a", "my", "and"}),
        )


@pytest.fixture(scope="module")
def people() -> PersonCueRecognizer:
    return PersonCueRecognizer(_Words(), allowed_words=["Teams", "Outlook"])


def _people_in(recognizer: PersonCueRecognizer, text: str) -> list[str]:
    return [text[r.start : r.end] for r in recognizer.analyze(text, ["PERSON"])]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Ask Ingrid Bergström about it", ["Ingrid Bergström"]),
        ("ask Csanád about it", ["Csanád"]),  # accents folded as the gazetteer stores names
        ("follow up with patricia desrosiers in a week", ["patricia desrosiers"]),
        ("Will Teams work?", []),  # an ordinary word, then an allowed product name
        ("Mark the ticket as done", []),
        ("Mark Tuohy will call back", ["Mark Tuohy"]),  # the surname is no English word
        ("Willemine ten Pas is on leave", []),  # not a listed given name, no cue
        ("my name is Willemine ten Pas", ["Willemine ten Pas"]),
        ("said Logan", []),  # ordinary word, and no tagger output to call it a name
        ("Signed by user Qx7", []),
    ],
)
def test_person_rules(people: PersonCueRecognizer, text: str, expected: list[str]) -> None:
    assert _people_in(people, text) == expected


def test_name_alone_on_a_line_heads_a_block(people: PersonCueRecognizer) -> None:
    assert _people_in(people, "Dreux Joly\nParis office") == ["Dreux Joly"]
    assert _people_in(people, "Follow Up\nIT team") == []


def test_fold_removes_accents_and_case() -> None:
    assert fold("Csanád") == "csanad"
    assert fold("ÅSA") == "asa"


def test_missing_gazetteer_leaves_cue_rules_only(monkeypatch: pytest.MonkeyPatch) -> None:
    given_names.cache_clear()
    monkeypatch.setattr(names_module.importlib.util, "find_spec", lambda name: None)
    try:
        assert given_names() == (frozenset(), frozenset())
    finally:
        given_names.cache_clear()


def test_gazetteer_is_read_without_importing_the_package() -> None:
    import importlib.util
    import sys

    if importlib.util.find_spec("nomquamgender") is None:
        pytest.skip("the name gazetteer package is not installed")
    given_names.cache_clear()
    names, frequent = given_names()

    assert "nomquamgender" not in sys.modules
    assert {"patricia", "ingrid", "csanad"} <= names
    assert frequent <= names
    assert "patricia" in frequent


# ------------------------------------------------------------------------------------------------
# Phone numbers and IBANs


@pytest.mark.parametrize(
    "text",
    [
        "Can someone call me on 904 1187 today?",  # "call" is a spaCy stop word
        "They're not answering at 71-33-52-22",
        "21 253 109 8211-Office",
    ],
)
def test_phone_word_in_the_raw_text_counts(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text).summary() == {"PHONE_NUMBER": 1}


def test_lower_case_iban_is_replaced(redactor: Redactor) -> None:
    redaction = redactor.redact("my iban is de89370400440532013000")

    assert redaction.text == "my iban is <IBAN_CODE_1>"


@pytest.mark.parametrize(
    ("entity_type", "value", "dropped"),
    [
        ("PERSON", "log queue", True),  # English words only
        ("PERSON", "wireless mouse", True),
        ("PERSON", "patricia", False),  # a given name
        ("PERSON", "Log Queue", False),  # capitalised: the model's reading stands
        ("LOCATION", "va", True),  # short tokens
        ("LOCATION", "frankfurt", False),
        ("LOCATION", "Floor 2", True),  # a room, not a place
        ("PERSON", "Mwangi 2", False),  # a word that is no English word
        ("PERSON", "Will Smith", False),  # no product name, no number
    ],
)
def test_lower_case_jargon_from_the_model_is_dropped(
    entity_type: str, value: str, dropped: bool
) -> None:
    recognizer = VocabularyCheckedSpacyRecognizer(_Words())

    assert recognizer.jargon(entity_type, value) is dropped


def test_the_redactor_uses_the_checked_model_output(analyzer: AnalyzerEngine) -> None:
    names = [r.name for r in analyzer.registry.recognizers]

    assert "VocabularyCheckedSpacyRecognizer" in names
    assert "SpacyRecognizer" not in names
    assert {"PersonCueRecognizer", "StreetAddressRecognizer"} <= set(names)


@pytest.mark.parametrize(
    "text",
    [
        "Account: 2q7731.leak@fastmailcom",  # OCR lost the dot before the domain's ending
        "write to jdoe@corp about it",  # an internal address without a public domain
    ],
)
def test_addresses_without_a_valid_domain_are_still_addresses(text: str) -> None:
    found = loose_email(text)
    assert found, text


def test_decorators_and_mentions_are_not_addresses() -> None:
    assert not loose_email("use @property in python, ping @channel")


def loose_email(text: str) -> list[str]:
    recognizer = PatternRecognizer("EMAIL_ADDRESS", patterns=LOOSE_EMAIL_PATTERNS)
    return [text[r.start : r.end] for r in recognizer.analyze(text, ["EMAIL_ADDRESS"])]
