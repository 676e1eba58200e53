"""Error signatures: the short, searchable facts in a log or a screenshot that say what failed.

What a caller can rely on:

* Kinds: Windows HRESULT/NTSTATUS codes (``0x80070005``, upper-case digits), HTTP error statuses
  written in a context that says so (``HTTP 503``), errno names (``ECONNREFUSED``) and numbers
  (``errno 111``), exception names (Java, .NET, Python, and the last line of a Python traceback),
  failing components (systemd units as named, others as ``component NAME``).
* De-duplicated, in order of first appearance in the text, at most ``limit``.
* Near-misses are left alone: addresses without the failure bit (``0x7ffe0000``), numbers that are
  not statuses (``took 503 ms``, ``port 4043``), bare words like ``Error`` or ``ERROR``.

:func:`first_error_at` gives the timestamp of the first error-bearing line, as written there.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

# -- codes --------------------------------------------------------------------------------------

# HRESULTs that report a failure, and NTSTATUS warnings and errors, have the top bit set: the first
# hex digit is 8 to F. Exactly eight digits, so 64-bit pointers do not match.
_HRESULT = re.compile(r"(?<![\w])0[xX]([89A-Fa-f][0-9A-Fa-f]{7})(?![\w])")

_HTTP_CODE = r"(4[0-5]\d|5[01]\d)"
_HTTP_REASONS = (
    "Bad Request|Unauthorized|Payment Required|Forbidden|Not Found|Method Not Allowed|"
    "Not Acceptable|Proxy Authentication Required|Request Time-?out|Conflict|Gone|"
    "Length Required|Precondition Failed|Payload Too Large|Request Entity Too Large|"
    "URI Too Long|Unsupported Media Type|Too Many Requests|Unprocessable Entity|"
    "Internal Server Error|Not Implemented|Bad Gateway|Service Unavailable|Gateway Time-?out|"
    "HTTP Version Not Supported|Network Authentication Required"
)
_HTTP = (
    # HTTP/1.1 503, HTTP 404, HTTP status 500, HTTP error 403, HTTP code: 502
    re.compile(
        rf"\bHTTP(?:/\d(?:\.\d)?)?[ \t]*(?:status|error|code|response)?(?:[ \t]*code)?"
        rf"[ \t]*[:=#]?[ \t]*{_HTTP_CODE}\b",
        re.IGNORECASE,
    ),
    # status code 404, status: 500, statusCode=503, response code 401, http_status=502
    re.compile(
        rf"\b(?:status[ _-]?code|statuscode|status|response[ _-]?code|http_status)"
        rf"[ \t]*[:=]?[ \t]*[\"']?{_HTTP_CODE}\b",
        re.IGNORECASE,
    ),
    # 503 Service Unavailable, (404) Not Found
    re.compile(rf"(?<![\w.:/-])\(?{_HTTP_CODE}\)?[ \t]+(?:{_HTTP_REASONS})\b", re.IGNORECASE),
)

_ERRNO_NAMES = (
    "CONNREFUSED|CONNRESET|CONNABORTED|TIMEDOUT|HOSTUNREACH|NETUNREACH|NETDOWN|NETRESET|"
    "ADDRINUSE|ADDRNOTAVAIL|ACCES|PERM|NOENT|EXIST|NOSPC|PIPE|AGAIN|NOTFOUND|AI_AGAIN|"
    "AI_NONAME|MFILE|NFILE|ROFS|IO|BUSY|NOMEM|INVAL|NOTDIR|ISDIR|NOTEMPTY|DQUOT|PROTO|"
    "SHUTDOWN|NOTCONN|HOSTDOWN|CANCELED|BADF|NXIO|TXTBSY|FBIG|LOOP|NAMETOOLONG|NOSYS|"
    "OPNOTSUPP|STALE|DEADLK|NOBUFS|MSGSIZE|PROTONOSUPPORT|AFNOSUPPORT|CERT_HAS_EXPIRED"
)
# Upper case only: errno names are written that way, prose is not.
_ERRNO_NAME = re.compile(rf"(?<![\w])((?:WSA)?E(?:{_ERRNO_NAMES}))(?![\w])")
_ERRNO_NUMBER = (
    re.compile(r"\berrno[ \t]*[:=]?[ \t]*(-?\d{1,4})\b", re.IGNORECASE),
    re.compile(r"\[Errno[ \t]+(-?\d{1,4})\]"),
)

# -- exceptions ---------------------------------------------------------------------------------

# java.net.ConnectException, System.UnauthorizedAccessException, requests.exceptions.SSLError,
# ConnectionRefusedError, NullReferenceException. A bare "Error"/"Exception" is not a name.
_EXCEPTION = re.compile(
    r"(?<![\w.$/\\])((?:[A-Za-z_][\w$]*\.)*[A-Z][\w$]*?(?:Exception|Error))(?![\w$])"
)
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):", re.MULTILINE)
# The line that ends a Python traceback: "Name: message" or a bare name, at the line start.
_UNINDENTED = re.compile(r"^[^\s].*$", re.MULTILINE)
_TRACEBACK_LAST = re.compile(r"([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)(?::|$)")

# -- failing components -------------------------------------------------------------------------

_ERROR_WORDS_PATTERN = (
    r"\b(?:errors?|err|fail(?:ed|ure|ures|s|ing)?|fatal|critical|crit|emerg|alert|"
    r"exceptions?|traceback|panic|denied|refused|unreachable|timed[ -]?out|timeout|"
    r"abort(?:ed|ing)?|crash(?:ed|es)?|segfault|unable to|cannot|can't|could not|"
    r"terminated unexpectedly)\b"
)
_ERROR_WORDS = re.compile(_ERROR_WORDS_PATTERN)
"""Searched in lower-cased text."""
_ERROR_WORDS_ANY_CASE = re.compile(_ERROR_WORDS_PATTERN, re.IGNORECASE)
_UNIT = re.compile(
    r"(?<![\w@.-])([A-Za-z0-9][\w@:.-]*\.(?:service|socket|timer|mount|target|path|scope))\b"
)
# "[vpnagent]" (a bracketed tag), "vpnagent[812]:" (syslog's process and pid).
_BRACKET_TAG = re.compile(r"\[([A-Za-z][\w.-]{2,40})\]")
_SYSLOG_PROCESS = re.compile(r"(?<![\w.-])([A-Za-z][\w.-]{1,40})\[\d{1,7}\]:")
# "service vpnagent failed", "The Print Spooler service terminated unexpectedly".
_SERVICE_FAILED = (
    re.compile(
        r"\b(?:service|daemon|agent)[ \t]+[\"'“]?([A-Za-z][\w.-]{1,40})[\"'”]?[ \t]+"
        r"(?:has[ \t]+)?(?:failed|crashed|stopped unexpectedly|terminated|exited|"
        r"could not start|did not start|is not running)",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b[Tt]he[ \t]+([A-Z][\w.-]*(?:[ \t]+[A-Z][\w.-]*){0,4})[ \t]+service[ \t]+"
        r"(?:terminated|failed|did not|could not|hung)"
    ),
)
# Tags that are levels, threads or formats rather than components.
_NOT_COMPONENTS = frozenset(
    {
        "error", "err", "errors", "warn", "warning", "info", "debug", "trace", "fatal",
        "critical", "crit", "notice", "alert", "emerg", "verbose", "main", "system", "kernel",
        "fail", "failed", "failure", "exception", "ok", "done", "severe", "stderr", "stdout",
        "the", "a", "an", "this", "that", "its", "windows", "http", "https", "errno",
    }
)  # fmt: skip

# -- timestamps ---------------------------------------------------------------------------------

_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_TIMESTAMP = re.compile(
    r"(?<!\d)(?:"
    # ISO 8601: 2024-03-05T14:22:01.123Z, 2024-03-05 14:22:01,456 +02:00
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:[ ]?Z|[ ]?[+-]\d{2}:?\d{2})?"
    # Windows setup logs and event exports: 2024/03/05 14:22:01
    r"|\d{4}/\d{2}/\d{2}[ ]\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,9})?"
    # Windows event viewer: 3/5/2024 2:22:01 PM
    r"|\d{1,2}/\d{1,2}/\d{4}[ ]\d{1,2}:\d{2}:\d{2}(?:[ ][AP]M)?"
    # syslog: Mar  5 14:22:01
    rf"|(?:{_MONTHS})[ ]{{1,2}}\d{{1,2}}[ ]\d{{2}}:\d{{2}}:\d{{2}}"
    r")(?!\d)"
)


@dataclass(frozen=True)
class TextScan:
    """One pass of every pattern over a whole text, in C: what a per-line loop would cost
    seconds on a 5 MB log."""

    lines: list[str]
    error_lines: list[int]
    """Indices of the lines that report a problem (an error word or a signature), ascending."""
    found: list[tuple[int, str]]
    """(offset in the text, signature), ascending."""

    def signatures(self, limit: int) -> list[str]:
        """De-duplicated, in order of first appearance, at most ``limit``."""
        seen: dict[str, None] = {}
        for _, signature in self.found:
            if signature not in seen:
                seen[signature] = None
                if len(seen) >= limit:
                    break
        return list(seen)

    def first_error_at(self) -> str | None:
        """The timestamp of the first error-bearing line, as written there.

        A line without a timestamp of its own (a stack-trace line) takes the latest one written
        above it; a text without timestamps gives None.
        """
        if not self.error_lines:
            return None
        for line in reversed(self.lines[: self.error_lines[0] + 1]):
            stamp = _TIMESTAMP.search(line)
            if stamp:
                return stamp.group(0)
        return None


def scan(text: str) -> TextScan:
    """Signatures and error-bearing lines of ``text`` (lines split on ``\\n``)."""
    lines = text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    found = [*_signatures_in(text), *_traceback_names(text)]
    lowered = text.lower()
    # Lower-casing first is several times faster than an IGNORECASE search; a few characters
    # change length when lower-cased, and then the offsets would not match: search as written.
    words = (
        _ERROR_WORDS.finditer(lowered)
        if len(lowered) == len(text)
        else _ERROR_WORDS_ANY_CASE.finditer(text)
    )
    error_lines = {bisect_right(starts, m.start()) - 1 for m in words}
    for index in sorted(error_lines):
        found.extend((starts[index] + pos, sig) for pos, sig in _components(lines[index]))
    error_lines.update(bisect_right(starts, pos) - 1 for pos, _ in found)
    found.sort(key=lambda item: item[0])
    return TextScan(lines, sorted(error_lines), found)


def extract(text: str, limit: int) -> list[str]:
    """The signatures in ``text``, de-duplicated in order of first appearance, at most ``limit``."""
    return scan(text).signatures(limit)


def is_error_line(line: str) -> bool:
    """Whether a line reports a problem: an error word or any signature on it."""
    return bool(scan(line).error_lines)


def first_error_at(lines: list[str]) -> str | None:
    """The timestamp of the first error-bearing line (see :meth:`TextScan.first_error_at`)."""
    return scan("\n".join(lines)).first_error_at()


def _signatures_in(text: str) -> Iterator[tuple[int, str]]:
    """(offset, signature) of every kind but components, which depend on their line."""
    for match in _HRESULT.finditer(text):
        yield match.start(), "0x" + match.group(1).upper()
    for pattern in _HTTP:
        for match in pattern.finditer(text):
            yield match.start(), f"HTTP {match.group(1)}"
    for match in _ERRNO_NAME.finditer(text):
        yield match.start(), match.group(1)
    for pattern in _ERRNO_NUMBER:
        for match in pattern.finditer(text):
            yield match.start(), f"errno {int(match.group(1))}"
    for match in _EXCEPTION.finditer(text):
        yield match.start(), match.group(1)


def _components(line: str) -> Iterator[tuple[int, str]]:
    """Failing components named on a line that reports a problem."""
    for match in _UNIT.finditer(line):
        yield match.start(), match.group(1)
    for pattern in (_BRACKET_TAG, _SYSLOG_PROCESS):
        for match in pattern.finditer(line):
            name = match.group(1)
            if _is_component(name):
                yield match.start(), f"component {name}"
    for pattern in _SERVICE_FAILED:
        for match in pattern.finditer(line):
            name = match.group(1)
            if _is_component(name) and not _UNIT.fullmatch(name):
                yield match.start(), f"component {name}"


def _is_component(name: str) -> bool:
    lowered = name.lower()
    return (
        lowered not in _NOT_COMPONENTS
        and not lowered.startswith(("thread", "pool-", "worker-"))
        and not _UNIT.fullmatch(name)
        and not name.replace(".", "").replace("-", "").isdigit()
    )


def _traceback_names(text: str) -> Iterator[tuple[int, str]]:
    """The exception on the line that ends each Python traceback (``socket.timeout``, too)."""
    for match in _TRACEBACK.finditer(text):
        # The first later line that is not indented (frames and source lines are).
        last = _UNINDENTED.search(text, match.end() + 1)
        if last:
            name = _TRACEBACK_LAST.match(last.group(0).rstrip("\r"))
            if name:
                yield last.start(), name.group(1)
