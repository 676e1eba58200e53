"""Secrets written the ways a blind evaluation set found the rules did not generalise to
(issue 13, held-out set 5, now spent as a blind set).

Each family is fixed at its root rather than by one rule per sentence: a token shaped like a
password anywhere near a word of signing in or of a secret, in many languages; codes named by
the app or device that gave them, in any grouping; values in structured text (CSV columns, XML
elements that hold a value element); answers to security questions. Every sentence here was
written for these tests (none is a sentence of an evaluation set), and each family has, beside
it, sentences of the same shape that hold no secret and must stay.
"""

from __future__ import annotations

import pytest

from redactor.service import Redactor
from redactor.tests.families import assert_no_secret, assert_redacted

Form = tuple[str, list[str]]

# -- a password-shaped token near a word of signing in, typing or describing a secret ---------
SHAPED_IN_CONTEXT: list[Form] = [
    ("SAP locked me out. I only tried twice!! first Harbour#07 then Harbour#08",
     ["Harbour#07", "Harbour#08"]),
    ("reset pls. tried everything: Autumn2023, Autumn2023!, Winter2024!. none work",
     ["Autumn2023", "Autumn2023!", "Winter2024!"]),
    ("the same popup asked for my pw and I typed it... Fern_Gate_4. I know. sorry",
     ["Fern_Gate_4"]),
    ("ich habe Kartoffel_2023 eingegeben, das ist seit gestern mein Kennwort",
     ["Kartoffel_2023"]),
    ("I put the temporary one you sent (Tmp-9921-Badger) and it says it expired.",
     ["Tmp-9921-Badger"]),
    ("I use the same one everywhere tbh. Walrus-Cake-31. is that why I got the breach warning",
     ["Walrus-Cake-31"]),
    ("Ich hab das Kennwort geändert auf Elbe-Nebel-Deich-7 und jetzt geht nichts",
     ["Elbe-Nebel-Deich-7"]),
    ("le mdp provisoire c'était Bonjour-Nantes-21 ? il ne marche plus", ["Bonjour-Nantes-21"]),
    ("it's my dog's name backwards plus 3, xamlA3, but apparently that's too weak now?",
     ["xamlA3"]),
    ("ok so it's t-u-l-i-p-s-4-2, lowercase, can you check it is set right",
     ["t-u-l-i-p-s-4-2"]),
    ("capital letters only on the first letter: H a z e l 1 9 8 8 - type it like that",
     ["H a z e l 1 9 8 8"]),
    # a new value set, with no word for what it is
    ("I reset it to Blue!Fish9 yesterday and now Outlook keeps asking", ["Blue!Fish9"]),
    ("changed it to Maple_Leaf_88 this morning, same problem", ["Maple_Leaf_88"]),
    ("hab es gestern auf Regen-Tag-12 geändert, seitdem geht nichts", ["Regen-Tag-12"]),
    ("je l'ai changé hier : Soleil#2024, toujours refusé", ["Soleil#2024"]),
    # capitalised words joined by dots, a number last: no file's name
    ("I reset it to Blue.Fish.9 but it is still locked", ["Blue.Fish.9"]),
]  # fmt: skip
SHAPED_IN_CONTEXT_NEAR_MISSES = [
    "my user jsmith01 is locked, I tried Windows11 and Server2019 logins",
    "login fails on NW-LT-0042 since build 22H2, error 0x80070005",
    "the sign-in page shows Version 4.2.1-beta and then nothing",
    "I tried the Room-12 screen and the Floor-3 printer, both say invalid badge",
    "after the login I tried the Latitude-5440 dock and the Yoga-7 one, both invalid",
    "password reset for k.lee_2 done, ticket INC0093311 closed",
    "I reset the router to firmware v2.3.1 and changed the channel to 11",
    "we changed it to Windows11 last week, reset NW-LT-0042 to factory settings",
    "changed the default printer to Floor-3 and reset the Teams cache",
    "after the password reset see syslog.1 and setup.log, I changed it to lowercase",
]

# -- codes named by their app or device, in any grouping, before "is your code", in a list ----
CODES: list[Form] = [
    ("the okta code is 880 214 6, it did not work", ["880 214 6"]),
    ("the webex meeting passcode is Qm47tz, can you host?", ["Qm47tz"]),
    ("recovery code for the vault app: QX4T-88ZA-K2P9-7MMB-1RTC, it says invalid",
     ["QX4T-88ZA-K2P9-7MMB-1RTC"]),
    ("la clave de la fotocopiadora de la segunda planta de Bilbao es 7315 pero no va", ["7315"]),
    ("kod z aplikacji to 662 019, ale nie działa", ["662 019"]),
    ("voicemail passcode reset to 40917 by the system", ["40917"]),
    ("the gate at the loading dock is jammed, code 7-2-0-5-1, nothing happens", ["7-2-0-5-1"]),
    ('"ACME: 551 902 is your code. Do not share it." it does not work', ["551 902"]),
    ("i need the backup codes again, i lost the card. the ones in my notes: 55102-83319, "
     "20475-66128", ["55102-83319", "20475-66128"]),
    ("le PIN de ma carte ne marche plus, l'ancien c'était 3391", ["3391"]),
]  # fmt: skip
CODE_NEAR_MISSES = [
    "the code is KB5034441 for the update",
    "error, code 0x80070005 when syncing",
    "the zoom meeting ID is 861 4472 0913 and the passcode is in the invite",
    "HTTP status, code 404 503",
    "the door sensor on floor 4 reports 12 events a day",
]

# -- values in structured text: a CSV column, an XML value element, a key named "..._KEY" -----
STRUCTURED: list[Form] = [
    ("Site,Login,Password,Comment\n"
     '"Boiler room panel",tech,Heat!Panel-2021,"changed after audit"\n'
     '"Badge printer",badgeadm,Print3r#Card,\n',
     ["Heat!Panel-2021", "Print3r#Card"]),
    ("name;user;pin;floor\nlocker 12;mfox;4417;2\nlocker 14;jdoe;9902;2",
     ["4417", "9902"]),
    ("<LocalAccount>\n  <Password>\n    <Value>Depot#Admin-77</Value>\n"
     "    <PlainText>true</PlainText>\n  </Password>\n</LocalAccount>",
     ["Depot#Admin-77"]),
    ('{"REPORTS_BLOB_KEY": "q8Vd2LmX0pTz7rWc4NbY1eKs9HgA3uJf6oQiZt5yPw=="}',
     ["q8Vd2LmX0pTz7rWc4NbY1eKs9HgA3uJf6oQiZt5yPw=="]),
    ("GET /api/export?fmt=csv&key=5f0c2a9e71d84b36a0e9c4f2b7d15e83 200 1532",
     ["5f0c2a9e71d84b36a0e9c4f2b7d15e83"]),
]  # fmt: skip
STRUCTURED_NEAR_MISSES = [
    "translation_key: app.title.main\nsort_key: created_at_desc_2024\ncache_key = user-42-v3",
    "public_key: AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
    'Site,Login,Password,Comment\nBoiler room,tech,,"reset by vendor"',
    "<Password>\n  <Value></Value>\n</Password>",
    "name,floor,key_id\nAnn,2,K-22",
]

# -- answers to security questions, named by what the question asks about ---------------------
ANSWERS: list[Form] = [
    ("the reset page wants my mother's maiden name, I put Ní Dhuibhir and it says no",
     ["Ní Dhuibhir"]),
    ("my first car was a green Renault Clio 2004, that's the answer I set back then",
     ["green Renault Clio 2004"]),
    ("the security question asks for my childhood best friend, it was Tomasz and it fails",
     ["Tomasz"]),
    ("Sicherheitsfrage nach dem Geburtsort: Gelsenkirchen, aber die Antwort wird abgelehnt",
     ["Gelsenkirchen"]),
    ("question secrète : nom de jeune fille de ma mère, j'ai mis Lefebvre", ["Lefebvre"]),
]  # fmt: skip
ANSWER_NEAR_MISSES = [
    "my first car was a Golf and it broke down on the way to the office",
    "the recovery page asks for my birthplace and says it is required",
    "security question: first pet's name is wrong apparently",
    "the reset asks for my favourite colour, I put it in twice",
]


def _members(families: list[list[Form]]) -> list[Form]:
    return [form for family in families for form in family]


FAMILIES: list[Form] = _members([SHAPED_IN_CONTEXT, CODES, STRUCTURED, ANSWERS])
NEAR_MISSES: list[str] = [
    *SHAPED_IN_CONTEXT_NEAR_MISSES,
    *CODE_NEAR_MISSES,
    *STRUCTURED_NEAR_MISSES,
    *ANSWER_NEAR_MISSES,
]


@pytest.mark.parametrize(("text", "values"), FAMILIES, ids=[t[:48] for t, _ in FAMILIES])
def test_every_member_of_a_family_is_redacted(
    redactor: Redactor, text: str, values: list[str]
) -> None:
    assert_redacted(redactor, text, values)


@pytest.mark.parametrize("text", NEAR_MISSES, ids=[t[:48] for t in NEAR_MISSES])
def test_sentences_of_the_same_shape_without_a_secret_stay(redactor: Redactor, text: str) -> None:
    assert_no_secret(redactor, text)
