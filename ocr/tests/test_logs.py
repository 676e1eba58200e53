"""What the service keeps of a log: its text in any common encoding, trimmed, and signatures."""

from __future__ import annotations

import codecs

import pytest

from ocr import signatures
from ocr.config import OcrSettings
from ocr.errors import AttachmentRefused
from ocr.logs import decode_log, read_log, trim_log

SETTINGS = OcrSettings(
    log_head_lines=3, log_tail_lines=3, log_max_lines=10, log_max_chars=2_000, max_line_chars=200
)

# -- encodings ----------------------------------------------------------------------------------


def test_utf8_with_and_without_bom() -> None:
    text = "2024-03-05 connexion refusée: Zürich-Büro\n"
    assert decode_log(text.encode("utf-8")) == (text, "utf-8")
    assert decode_log(codecs.BOM_UTF8 + text.encode("utf-8")) == (text, "utf-8")


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_with_bom_or_by_its_pattern(codec: str) -> None:
    text = "Windows Update failed: 0x80070005 (Zugriff verweigert)\r\nsecond line\r\n"
    data = text.encode(codec)  # "utf-16" writes a BOM; the others do not

    decoded, _ = decode_log(data)

    assert decoded == "Windows Update failed: 0x80070005 (Zugriff verweigert)\nsecond line\n"


def test_cp1252_legacy_text() -> None:
    text = (
        "Fehler beim Öffnen der Datei – Zugriff verweigert für Benutzer Müller\n"
        "Le serveur a renvoyé une réponse inattendue: « accès refusé »\n"
    ) * 3
    decoded, encoding = decode_log(text.encode("cp1252"))

    assert "Öffnen" in decoded
    assert "–" in decoded
    assert "« accès refusé »" in decoded
    assert encoding.replace("_", "").lower() in {"cp1252", "windows1252"}


@pytest.mark.parametrize(
    "line",
    [
        "Fehler: Zugriff verweigert. Bitte prüfen Sie die Berechtigungen für Laufwerk Ü:",
        "Drucker im Büro München nicht erreichbar",
        "2024-03-05 10:12:01 FEHLER Anmeldung fehlgeschlagen für Benutzer Jürgen Bäcker",
    ],
)
def test_a_german_windows_log_reads_as_cp1252(line: str) -> None:
    # Short German text fits cp775 (Baltic) or cp1250 as well for the detector's first choice;
    # either turns "ü" into "³" or "Ü" into "▄".
    decoded, encoding = decode_log((line + "\r\n").encode("cp1252"))

    assert decoded == line + "\n"
    assert encoding == "cp1252"


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32", "utf-32-le"])
def test_a_german_log_in_utf16_or_utf32_reads_right(codec: str) -> None:
    text = "Größe überschritten: Datei „Übersicht.xlsx“ – 0x80070070\r\nnächste Zeile\r\n"

    decoded, _ = decode_log(text.encode(codec))

    assert decoded == text.replace("\r\n", "\n")


@pytest.mark.parametrize(
    "data",
    [
        b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00" + bytes(range(256)) * 4,  # an executable
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(range(256)) * 8,  # a zip archive
        b"log line\n" + b"\x00\x00\x01\x02\x03" * 50,  # NULs that are not UTF-16
        b"\x01\x02\x03\x04\x05\x06\x07\x08 text with control bytes \x0e\x0f\x10\x11" * 20,
    ],
)
def test_binary_content_is_refused_as_unsupported(data: bytes) -> None:
    with pytest.raises(AttachmentRefused) as refused:
        read_log(data, SETTINGS)

    assert refused.value.error_code == "unsupported_media_type"
    assert "text" in refused.value.detail


def test_log_over_the_size_limit_is_refused() -> None:
    settings = OcrSettings(max_log_bytes=1024)
    with pytest.raises(AttachmentRefused) as refused:
        read_log(b"ERROR something\n" * 100, settings)

    assert refused.value.error_code == "attachment_too_large"


def test_ansi_colours_and_crlf_are_removed() -> None:
    decoded, _ = decode_log(b"\x1b[31mERROR\x1b[0m disk full\r\nok\r\n")

    assert decoded == "ERROR disk full\nok\n"


# -- trimming -----------------------------------------------------------------------------------


def numbered(count: int, errors: dict[int, str] | None = None) -> list[str]:
    errors = errors or {}
    return [errors.get(i, f"2024-03-05 10:00:{i % 60:02d} INFO step {i} ok") for i in range(count)]


def test_short_log_is_kept_whole() -> None:
    lines = numbered(8)

    text, omitted = trim_log(lines, SETTINGS)

    assert text.splitlines() == lines
    assert omitted == 0


def test_long_log_keeps_head_tail_and_error_lines_with_markers() -> None:
    lines = numbered(100, {40: "2024-03-05 10:00:40 ERROR disk quota exceeded on /home"})

    text, omitted = trim_log(lines, SETTINGS)

    assert text.splitlines() == [
        *lines[:3],
        "… 37 lines omitted …",
        lines[40],
        "… 56 lines omitted …",
        *lines[97:],
    ]
    assert omitted == 93


def test_error_lines_beyond_the_line_limit_keep_the_first_and_the_last() -> None:
    errors = {i: f"ERROR number {i} failed" for i in range(10, 90, 5)}  # 16 error lines
    lines = numbered(100, errors)

    kept = trim_log(lines, SETTINGS)[0].splitlines()
    kept_errors = [line for line in kept if line.startswith("ERROR")]

    assert len([line for line in kept if "omitted" not in line]) == SETTINGS.log_max_lines
    assert kept_errors == ["ERROR number 10 failed", "ERROR number 15 failed",
                           "ERROR number 80 failed", "ERROR number 85 failed"]  # fmt: skip


def test_character_limit_bounds_the_text() -> None:
    settings = OcrSettings(
        log_head_lines=20, log_tail_lines=20, log_max_lines=60, log_max_chars=1_000
    )
    lines = [f"line {i} " + "x" * 80 for i in range(500)]

    text, _ = trim_log(lines, settings)

    assert len(text) <= 1_000
    assert text.startswith("line 0 ")
    assert text.splitlines()[-1].startswith("line 499 ")
    assert "omitted …" in text


def test_long_lines_are_cut() -> None:
    text, _ = trim_log(["E" * 1_000], SETTINGS)

    assert len(text) == SETTINGS.max_line_chars
    assert text.endswith("…")


def test_read_log_reports_signatures_of_the_whole_log_and_the_first_error_time() -> None:
    lines = numbered(200, {120: "2024-03-05 10:02:00 ERROR sync failed: HTTP 503"})
    data = "\n".join(lines).encode()

    log = read_log(data, SETTINGS)

    assert log.signatures == ["HTTP 503"]
    assert log.first_error_at == "2024-03-05 10:02:00"
    assert log.lines == 200
    assert "HTTP 503" in log.text


def test_empty_log_is_refused() -> None:
    with pytest.raises(AttachmentRefused) as refused:
        read_log(b"\n\n  \n", SETTINGS)

    assert refused.value.error_code == "extraction_failed"


# -- signatures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Installation failed with error 0x80070005", ["0x80070005"]),
        ("STATUS_ACCESS_VIOLATION (0xc0000005)", ["0xC0000005"]),
        ("GET /api/v2/tickets HTTP/1.1 503", ["HTTP 503"]),
        ("upstream responded: status code 404", ["HTTP 404"]),
        ("statusCode=502 from gateway", ["HTTP 502"]),
        ("The remote server returned an error: (401) Unauthorized.", ["HTTP 401"]),
        ("connect ECONNREFUSED 10.0.0.5:443", ["ECONNREFUSED"]),
        ("read ETIMEDOUT", ["ETIMEDOUT"]),
        ("socket error errno 111", ["errno 111"]),
        ("OSError: [Errno 28] No space left on device", ["OSError", "errno 28"]),
        ("Exception in thread main java.net.ConnectException: refused",
         ["java.net.ConnectException"]),
        ("Unhandled exception. System.UnauthorizedAccessException: denied",
         ["System.UnauthorizedAccessException"]),
        ("requests.exceptions.SSLError: certificate verify failed",
         ["requests.exceptions.SSLError"]),
        ("Failed to start nginx.service - A high performance web server.", ["nginx.service"]),
        ("2024-03-05 10:00:01 [vpnagent] ERROR tunnel negotiation failed", ["component vpnagent"]),
        ("Mar  5 14:22:03 ws01 cupsd[812]: failed to open printer", ["component cupsd"]),
        ("service vpnagent failed to respond", ["component vpnagent"]),
        ("The Print Spooler service terminated unexpectedly.", ["component Print Spooler"]),
    ],
)  # fmt: skip
def test_signature_kinds(line: str, expected: list[str]) -> None:
    assert signatures.extract(line, 10) == expected


@pytest.mark.parametrize(
    "line",
    [
        "pointer 0x7ffe0000 mapped at 0x00400000",  # no failure bit
        "base address 0xffffffff80001000",  # a 64-bit address, not an 8-digit code
        "request took 503 ms on port 4043",  # numbers that are not statuses
        "processed 404 records in 500 batches",
        "HTTP/1.1 200 OK",  # a success status
        "An Error occurred. ERROR. Exception handling enabled.",  # bare words
        "EXISTING CONNECTIONS: 12, ECHO enabled",  # upper-case words that are not errno names
        "[INFO] [main] nginx.service started",  # a unit on a line without a problem
        "[worker-3] [thread-7] job complete",
    ],
)
def test_near_misses_are_not_signatures(line: str) -> None:
    assert signatures.extract(line, 10) == []


def test_python_traceback_last_line_is_a_signature() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "sync.py", line 3, in <module>\n'
        "    main()\n"
        "socket.timeout: timed out\n"
        "Traceback (most recent call last):\n"
        '  File "sync.py", line 9, in <module>\n'
        "KeyboardInterrupt\n"
    )
    assert signatures.extract(text, 10) == ["socket.timeout", "KeyboardInterrupt"]


def test_signatures_are_deduplicated_in_order_and_capped() -> None:
    text = (
        "ERROR 0x80070005 then HTTP 503\n"
        "again 0x80070005 and ECONNRESET\n"
        "finally HTTP 503 and ETIMEDOUT and EPIPE\n"
    )
    assert signatures.extract(text, 10) == [
        "0x80070005", "HTTP 503", "ECONNRESET", "ETIMEDOUT", "EPIPE"
    ]  # fmt: skip
    assert signatures.extract(text, 2) == ["0x80070005", "HTTP 503"]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["2024-03-05T14:22:01.123Z INFO ok", "2024-03-05T14:22:09.5+02:00 ERROR boom"],
         "2024-03-05T14:22:09.5+02:00"),
        (["Mar  5 14:22:01 ws01 sshd[1]: ok", "Mar  5 14:22:03 ws01 sshd[1]: error: bad key"],
         "Mar  5 14:22:03"),
        (["3/5/2024 2:22:01 PM Information ok", "3/5/2024 2:22:04 PM Error The service failed"],
         "3/5/2024 2:22:04 PM"),
        (["2024/03/05 14:22:01 start", "  at Foo.Bar()", "2024/03/05 14:22:02 Exception: boom"],
         "2024/03/05 14:22:02"),
        (["2024-03-05 14:22:01 running", "Traceback (most recent call last):"],
         "2024-03-05 14:22:01"),  # a line without a time takes the latest one above it
        (["no times here", "ERROR but no time"], None),
    ],
)  # fmt: skip
def test_first_error_timestamp(lines: list[str], expected: str | None) -> None:
    assert signatures.first_error_at(lines) == expected
