"""A help page and a PDF manual with headings, numbered steps, code and a table, for the tests
that compare a crawled page with the same file uploaded (both go through the indexer's
extractor)."""

from __future__ import annotations

from tests.support.pdf import build_pdf

GUIDE_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Reset your VPN password | IT Help</title>
<style>main { max-width: 40em }</style>
<script>window.analytics = "SCRIPT-TEXT";</script>
</head>
<body>
<header><a href="/">IT Help</a> <span>HEADER-TEXT</span></header>
<nav><ul><li><a href="/">Home</a></li><li><a href="/printers.html">Printers</a></li></ul></nav>
<main>
  <h1>Reset your VPN password</h1>
  <p>The VPN uses its own password, which expires every <strong>90 days</strong>.</p>
  <h2>On Windows</h2>
  <ol>
    <li>Open the <a href="/portal.html">self-service portal</a>.</li>
    <li>Choose <em>Reset VPN password</em> and confirm with your authenticator app.</li>
    <li>Sign in to the VPN client again.</li>
  </ol>
  <h2>From a terminal</h2>
  <pre><code class="language-bash">vpnctl reset --user "$USER"
vpnctl connect --profile office</code></pre>
  <h3>Which client</h3>
  <table>
    <tr><th>System</th><th>Client</th></tr>
    <tr><td>Windows</td><td>GlobalProtect 6</td></tr>
    <tr><td>macOS</td><td>GlobalProtect 6</td></tr>
  </table>
  <h2>See also</h2>
  <ul>
    <li><a href="/printers.html">Printers</a></li>
    <li><a href="/wifi.html">Wi-Fi</a></li>
  </ul>
</main>
<footer>FOOTER-TEXT <a href="/legal.html">Legal</a></footer>
</body></html>
"""
"""Chrome (header, navigation, footer, scripts) around content of every kind a block can be;
the "See also" list is a list of links to other pages, which extraction leaves out."""

GUIDE_CHROME = ("SCRIPT-TEXT", "HEADER-TEXT", "FOOTER-TEXT", "max-width")

MANUAL_PDF = build_pdf(
    [
        [
            (20, "Badge printer manual"),
            (11, "The Quasar-7 prints visitor badges at reception. When the ribbon runs low"),
            (11, "it stops and its light turns amber."),
            (14, "Reset the printer"),
            (11, "1. Open the front cover."),
            (11, "2. Hold the reset key for ten seconds until the light"),
            (11, "blinks, then release it."),
            (11, ""),
            (11, "Run the self-test from a terminal:"),
            (10, "quasarctl selftest --full", "mono"),
        ],
        [
            (14, "Order supplies"),
            (11, "Ribbons NW-RIB-7 are ordered from the IT shop like any other consumable."),
        ],
    ],
    title="Quasar-7 badge printer",
)
"""A manual whose structure only its fonts tell: two heading sizes, steps, code in Courier."""
