"""What the redactor took for personal data in text written by others, by family (issue 13).

Each family is a cause of a wrong report, with several members: a certificate's thumbprint read
as MAC addresses, a version or an order number read as a phone number, a logger's name read as a
host, a command's login target read as an e-mail address, the loopback address, a list of
addresses taken as one token, words of another language or of a greeting read as a person, a
configuration file's ``name:`` read as someone's name, Spanish "al" read as a street. Beside each,
the values of the same kind that are still found.
"""

from __future__ import annotations

import pytest

from redactor.service import Redactor

# (text, entity type that must not be reported)
NOT_PERSONAL: list[tuple[str, str]] = [
    ("Thumbprint 3A:7F:12:9C:E4:5B:08:D1:66:2F:A9:C3:71:0E:B8:4D:95:2A:F6:13", "MAC_ADDRESS"),
    ("sha1 fingerprint AB-CD-EF-01-23-45-67-89-AB-CD-EF-01", "MAC_ADDRESS"),
    ("winget upgrade --id Microsoft.Teams --version 24124.2311.2911.3341", "MAC_ADDRESS"),
    ("Chrome version 126.0.6478.127 on Windows 11", "PHONE_NUMBER"),
    ("firmware 2.14.1055.33 on the dock", "PHONE_NUMBER"),
    ("order number PO-2024-008812 for the monitors", "PHONE_NUMBER"),
    ("INFO mail.delivery: bounce for user unknown", "URL"),
    ("WARN auth.service: token refresh failed", "URL"),
    ("sshpass -p x ssh netadmin@core-sw01 uptime", "EMAIL_ADDRESS"),
    ("scp report.pdf jdoe@fs01:/tmp/", "EMAIL_ADDRESS"),
    ("no_proxy = localhost,127.0.0.1", "IP_ADDRESS"),
    ("listening on 0.0.0.0:8080 and ::1", "IP_ADDRESS"),
    ("Meine Geräte-PIN geht nicht mehr", "PERSON"),
    ("Sehr geehrte Damen und Herren, bitte um Rückruf", "PERSON"),
    ("Hallo,\n\ndas Portal geht nicht.\n\nViele Grüße", "PERSON"),
    ("Cheers, and thanks again", "PERSON"),
    ("vous pouvez me joindre demain", "PERSON"),
    ("het wachtwoord van de gedeelde mailbox werkt niet", "PERSON"),
    ("für die Freischaltung im HR-Portal", "PERSON"),
    ("rclone config create offsite s3", "PERSON"),
    ("npm ERR! code E401", "PERSON"),
    ("Jun 03 08:44:10 vpn01 openvpn[2211]: connection reset", "PERSON"),
    ("metadata:\n  name: grafana-admin\n  namespace: monitoring", "PERSON"),
    ("headers={'Accept': 'application/json'}", "PERSON"),
    ("mi contraseña no me deja entrar al correo", "STREET_ADDRESS"),
]
STILL_PERSONAL: list[tuple[str, str]] = [
    ("the dock's MAC is 8C:16:45:A2:7F:01", "MAC_ADDRESS"),
    ("call me on +44 7700 900123 please", "PHONE_NUMBER"),
    ("mail me at k.lindqvist@northwind.example", "EMAIL_ADDRESS"),
    ("ping 10.20.30.40 works but the share does not", "IP_ADDRESS"),
    ("Viele Grüße\nKatrin Vossberg", "PERSON"),
    ("my colleague Ingrid Schäfer-Lindner is on leave", "PERSON"),
    ("my name is patricia desrosiers", "PERSON"),
    ("Name: Jean-Luc Moreau", "PERSON"),
    ("ul. Miła 53, Warszawa", "STREET_ADDRESS"),
]


@pytest.mark.parametrize(("text", "kind"), NOT_PERSONAL, ids=[t[:40] for t, _ in NOT_PERSONAL])
def test_what_only_looks_personal_stays(redactor: Redactor, text: str, kind: str) -> None:
    assert kind not in redactor.redact(text).summary(), redactor.redact(text).text


@pytest.mark.parametrize(("text", "kind"), STILL_PERSONAL, ids=[t[:40] for t, _ in STILL_PERSONAL])
def test_what_is_personal_is_still_found(redactor: Redactor, text: str, kind: str) -> None:
    assert kind in redactor.redact(text).summary(), redactor.redact(text).text
