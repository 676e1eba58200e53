"""Secrets given without the words the rules first looked for (issue 13, held-out sets 3 and 4).

Text written blind by people who never read the rules gave passwords, PINs and codes in ways
the rules did not know: typed or tried in a message about a lockout with no password word,
named by what it replaces ("the old one was X", "das neue X"), described by its letters ("all
lowercase"), shortened in another language ("mijn ww is"), as a factory pair ("admin / admin"),
as a tool prints it (netsh's "Key Content"), as a code named by its length or its app, in a list
after a remark, or hidden in base64. Each family has members written for these tests (none is a
sentence of the held-out sets) and, beside it, sentences of the same shape that hold no secret.
"""

from __future__ import annotations

import pytest

from redactor.service import Redactor
from redactor.tests.families import assert_no_secret, assert_redacted

Form = tuple[str, list[str]]

# -- typed, tried or used in a message about signing in, with no password word ----------------
TYPED: list[Form] = [
    ("the account locked itself after I entered Poppy_Field2020 twice", ["Poppy_Field2020"]),
    ("tried Granite#Hill4 again, still says wrong credentials", ["Granite#Hill4"]),
    ("Moonlit!River6 is what I typed, is the caps lock thing a problem?", ["Moonlit!River6"]),
    ("try Saturn2031 thats what I chose last week", ["Saturn2031"]),
    ("for the HR portal I use Bramble_44, same as my email one", ["Bramble_44"]),
]
TYPED_NEAR_MISSES = [
    "I tried Office365 and the login still fails",
    "I typed Chrome in the search box and the sign-in page opened",
    "we use Server2019 for the login servers",
    "Teams is what we use, the login works",
]

# -- described by its letters, or "it was X" after a password word ------------------------------
DESCRIBED: list[Form] = [
    ("its marble2017 all lowercase, no spaces", ["marble2017"]),
    ("it's T h u n d e r b a y 9 with a capital T", ["T h u n d e r b a y 9"]),
    ("I sent my password to the wrong chat by mistake, it was Ferry#Dock12", ["Ferry#Dock12"]),
]
DESCRIBED_NEAR_MISSES = [
    "it was 10am when the login failed, all lowercase in the log",
    "my password expired, it was 2 weeks ago",
    "it's 12GB all lowercase in the report",
]

# -- named by what it replaces, in several languages; a PIN named so --------------------------
BY_REFERENCE: list[Form] = [
    ("for the audit: the old one was Harbor$1999", ["Harbor$1999"]),
    ("mein Passwort lief ab und das neue Sonnenblume#8 geht nicht", ["Sonnenblume#8"]),
    ("my login fails: I tried the new one Cobalt_Ridge2024 twice", ["Cobalt_Ridge2024"]),
    ("voicemail PIN trouble, the last one I had was 5521", ["5521"]),
    ("the tablet wants a PIN and my wife says she set 7093", ["7093"]),
    ("same for everything: Walnut&Fog31, please unlock it", ["Walnut&Fog31"]),
]
BY_REFERENCE_NEAR_MISSES = [
    "the new one is a Latitude 7440, the old one was E5570",
    "the old one was slow, the new one is fine",
    "the PIN pad is broken and I set 2 reminders",
    "I use the same for every app, is that a problem?",
]

# -- cue words abroad: shortened, before a prepositional phrase, with a past verb --------------
ABROAD: list[Form] = [
    ("mijn ww is Kaas!Schaaf9, werkt niet meer", ["Kaas!Schaaf9"]),
    ("la clave de la wifi de la sala es Limonero_77", ["Limonero_77"]),
    ("a palavra-passe do portal era Caravela2021", ["Caravela2021"]),
]
ABROAD_NEAR_MISSES = [
    "the password portal is down again",
    "la clave del portal no funciona desde ayer",
    "WW2 documentaries are not on the intranet",
]

# -- factory pairs, a default after its word with a remark, an account set to a value ----------
DEFAULTS: list[Form] = [
    # the account name stays: only what follows the separator is the secret
    ("the NAS still takes admin / admin on its web UI", ["/ admin"]),
    ("the lab access point answers to ubnt:ubnt on ssh", [":ubnt"]),
    ("camera login admin, password 1234 (factory default)", ["1234"]),
    ("please set the local admin on the lab PCs to 'Lab#Bench2025'", ["Lab#Bench2025"]),
]
DEFAULT_NEAR_MISSES = [
    "run chown root:root /etc/app.conf before the restart",
    "docker run -u root:root alpine, then log in",
    "the admin/root account split is in the wiki",
    "I set the account to read-only and the user to jdoe",
]

# -- a Wi-Fi key as netsh prints it, a recovery key in a tool's terse listing ------------------
TOOL_OUTPUT: list[Form] = [
    ("    Key Content            : Gull#Harbour5", ["Gull#Harbour5"]),
    ("    Schlüsselinhalt        : Apfelbaum!22", ["Apfelbaum!22"]),
    (
        "Numerical Password:\n  ID: {1C2D3E4F-0000-4A5B-8C9D-112233445566}\n  Password:\n"
        "    402193-551870-118822-903311-664470-207715-395528-810046",
        ["402193-551870-118822-903311-664470-207715-395528-810046"],
    ),
]
TOOL_OUTPUT_NEAR_MISSES = [
    "    Security key           : Present",
    "    Key Content            : Absent",
]

# -- codes named by their length or their app, shown "now", in a list after a remark ----------
CODES: list[Form] = [
    ("the 8-digit code was 1183 0925 and it failed", ["1183 0925"]),
    ("code from the authenticator: 33 81 07, still no luck", ["33 81 07"]),
    ("the Duo push never comes, I can only see the code 604 219", ["604 219"]),
    ("the app said 771 042, then it timed out and now it shows 519 330", ["519 330"]),
    (
        "my MFA backup codes, in case you need them: 2210 4471, 9083 1126",
        ["2210 4471", "9083 1126"],
    ),
    ("the PUK on the sticker says 71830924, please help", ["71830924"]),
    ("reset code from the portal: B4T-71Q-K2M, it says expired", ["B4T-71Q-K2M"]),
]
CODE_NEAR_MISSES = [
    "the 6-digit code field is greyed out",
    "error code from the app: 404",
    "the printer display says 123456 pages printed",
    "the serial on the box is AB1-CD2-EF3",
]

# -- pairs and encodings: AWS keys side by side, base64 of user:password ----------------------
ENCODED: list[Form] = [
    (
        "old keys: AKIAZ3QW7ERT5YUI8OPL / Hq2Lm9Xv4Bn7Tc1Rz8Wd3Kf6Gp5Ys0Je2Na4Ub7M",
        ["Hq2Lm9Xv4Bn7Tc1Rz8Wd3Kf6Gp5Ys0Je2Na4Ub7M"],
    ),
    ('"auth": "c2NhbjpTa3lsaW5lITQ0"', ["c2NhbjpTa3lsaW5lITQ0"]),  # scan:Skyline!44
    (
        "$ echo 'b3BzOlJpdmVyJlN0b25lMw==' | base64 -d\nops:River&Stone3",
        ["b3BzOlJpdmVyJlN0b25lMw==", "River&Stone3"],
    ),
    ("it's my first car plus my lucky number: Corolla17, is it locked?", ["Corolla17"]),
]
ENCODED_NEAR_MISSES = [
    "$ echo 'aGVsbG8gd29ybGQ=' | base64 -d",  # hello world
    "it's the name of our street plus the house number, nothing special",
]

# -- a guess, a value used in a sign-in message, a pair in one ----------------------------------
GUESSED_AND_PAIRED: list[Form] = [
    ("I think the password could be Pelican!4, not sure", ["Pelican!4"]),
    ("the portal says access denied, I'm using Bluejay2026 as always", ["Bluejay2026"]),
    ("login fails for kmeyer:Orbit#Nine3 since Monday", ["Orbit#Nine3"]),
    ("the creds are svc_scan and Lemonade88", ["Lemonade88"]),
]
GUESSED_AND_PAIRED_NEAR_MISSES = [
    "my password might be expired, the page says so",
    "my password works in Edge but not in Chrome120",
    "the sign-in fails, the cache is redis-02.corp.local:6379,ssl=false",
    "my credentials are stored in the vault",
]

# -- PINs written in other ways ------------------------------------------------------------------
PIN_FORMS: list[Form] = [
    ("my PIN's 4183 if you need it", ["4183"]),
    ("the PIN (7720) is refused", ["7720"]),
    ("my pin is nine one one four", ["nine one one four"]),
    ("the pin is either 5830 or 5380", ["5830", "5380"]),
    ("my tablet code is 1946, can you wipe it?", ["1946"]),
    ("screen lock is 8264 on the work phone", ["8264"]),
    ("I type 3107 to unlock the laptop every morning", ["3107"]),
]
PIN_FORM_NEAR_MISSES = [
    "my pin is one of the four digits on the card",
    "I entered 2024 in the year field to unlock the form",
    "the area code is 0221 and the country code 49",
    "screen lock turns on after 5 minutes",
]

# -- described, in parts, after a remark ----------------------------------------------------
DESCRIBED_MORE: list[Form] = [
    ("pw = same as before: Walrus#Bay6", ["Walrus#Bay6"]),
    ("my password is the name of my horse then 56", ["56"]),
    ("it's my son's name with his birth year, Noah2016", ["Noah2016"]),
    ("the password has my cat's name, Felix, and 2009", ["Felix", "2009"]),
    ("my password: the first part is Orange and then 1999", ["Orange", "1999"]),
    ("case sensitive: Bluemoon, and it still fails", ["Bluemoon"]),
    ("my old pw was Biscuit then the year, so Biscuit2021", ["Biscuit2021"]),
    ("my password is capitalised: Harbour plus 12", ["Harbour plus 12"]),
    ("the code for the gate is the year the shop opened, 1991", ["1991"]),
    ("my password is like Winter but with numbers... W1nter2024", ["W1nter2024"]),
]
DESCRIBED_MORE_NEAR_MISSES = [
    "the password has 8 characters and a symbol",
    "the password has expired, the policy is 90 days",
    "the key ID starts with 7C2E91A0, which key is it?",
    "it starts with a login page and ends with an error",
    "password for server01 expired, see CHG-4471",
    "WARNING: Using --password via the CLI is insecure",
    "my password expired last week, so 2024 is over",
    "the password page is slow, so v2.3 needs a fix",
]

# -- spelled with the case of each letter, spelled where a password is talked of, cut short --
SPELLED_AND_SHORT: list[Form] = [
    ("my password is capital T, i, g, e, r, 8, 8", ["T, i, g, e, r, 8, 8"]),
    ("it's like this: R e d F o x 1 2, try it on the kiosk", ["R e d F o x 1 2"]),
    ("pw-Moonstone44 for the shared box", ["Moonstone44"]),
    ("passw: Pinecone21", ["Pinecone21"]),
    ("pin is the year my daughter was born, 2013", ["2013"]),
    ("my password is my team plus 9, so Ajax9", ["Ajax9"]),
    ('the password is the word "Harbour" with a 5 at the end', ["Harbour", "5"]),
]
SPELLED_AND_SHORT_NEAR_MISSES = [
    "the table has columns A B C D E F and 1 2 3 4 5 6",
    "P-A-S-S-W-O-R-D reset page does not load",
    "password-protected files cannot be opened",
    "my pin is the same as before, 2 tries left",
    "my password is the one from the email, INC0045123 has it",
]

# -- a spaced sign, spaced digits by reference, odd groups, labels, a value asked about -----
ASKED_AND_LABELLED: list[Form] = [
    ("the pass I chose = Riverside4, now it fails", ["Riverside4"]),
    ("forgot my PIN, it was 7 2 9 4 1 0", ["7 2 9 4 1 0"]),
    ("Passcode for the bridge: 774 120 5", ["774 120 5"]),
    ("u: hweber p: Linde#Baum3", ["Linde#Baum3"]),
    ("would Cobalt#9 be a strong enough password?", ["Cobalt#9"]),
    ("the shared secret for radius is Rad!Key2024", ["Rad!Key2024"]),
]
ASKED_AND_LABELLED_NEAR_MISSES = [
    "auth=oauth mode=password retries=3",
    "the meeting starts in 12 34 5 minutes",
    "is Windows11 a good choice for the password manager?",
    "the shared secret is out, everyone knows",
]

# -- the same families in other languages --------------------------------------------------------
ABROAD_MORE: list[Form] = [
    ("Mein Passwort ist der Name meines Pferdes und 2018, also Blitz2018", ["Blitz2018"]),
    ("mon mot de passe c'est le nom de ma ville suivi de 7 : Lyon7", ["Lyon7"]),
    ("j'ai mis Nuage!31 comme mot de passe", ["Nuage!31"]),
    ("puse Viernes#9 como contraseña", ["Viernes#9"]),
    ("ik gebruik Molen!21 als wachtwoord", ["Molen!21"]),
    ("mi pin es siete tres uno cero", ["siete tres uno cero"]),
    ("meine PIN ist vier zwei acht eins", ["vier zwei acht eins"]),
]
ABROAD_MORE_NEAR_MISSES = [
    "ik gebruik Outlook als mailprogramma",
    "il mio PIN è uno dei quattro numeri sulla lettera",
    "j'ai mis le portable comme appareil principal",
]

FAMILIES: list[Form] = [
    *TYPED, *DESCRIBED, *BY_REFERENCE, *ABROAD, *DEFAULTS, *TOOL_OUTPUT, *CODES, *ENCODED,
    *GUESSED_AND_PAIRED, *PIN_FORMS, *DESCRIBED_MORE, *SPELLED_AND_SHORT, *ASKED_AND_LABELLED,
    *ABROAD_MORE,
]  # fmt: skip
NEAR_MISSES: list[str] = [
    *TYPED_NEAR_MISSES, *DESCRIBED_NEAR_MISSES, *BY_REFERENCE_NEAR_MISSES, *ABROAD_NEAR_MISSES,
    *DEFAULT_NEAR_MISSES, *TOOL_OUTPUT_NEAR_MISSES, *CODE_NEAR_MISSES, *ENCODED_NEAR_MISSES,
    *GUESSED_AND_PAIRED_NEAR_MISSES, *PIN_FORM_NEAR_MISSES, *DESCRIBED_MORE_NEAR_MISSES,
    *SPELLED_AND_SHORT_NEAR_MISSES, *ASKED_AND_LABELLED_NEAR_MISSES, *ABROAD_MORE_NEAR_MISSES,
]  # fmt: skip


@pytest.mark.parametrize(("text", "values"), FAMILIES, ids=[t[:48] for t, _ in FAMILIES])
def test_every_member_of_a_family_is_redacted(
    redactor: Redactor, text: str, values: list[str]
) -> None:
    assert_redacted(redactor, text, values)


@pytest.mark.parametrize("text", NEAR_MISSES, ids=[t[:48] for t in NEAR_MISSES])
def test_sentences_of_the_same_shape_without_a_secret_stay(redactor: Redactor, text: str) -> None:
    assert_no_secret(redactor, text)
