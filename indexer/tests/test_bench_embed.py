"""The indexing-time benchmark on three small files: its figures must agree with each other, and
static boundaries must send no sentence through the model."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from indexer.tests import bench_embed

PRINTER = (
    "The shared printer on the third floor is called FLOOR3-PRINT. It prints double-sided by "
    "default to save paper. Colour printing needs a cost centre code from your manager. Paper "
    "jams are cleared by opening the front tray. Toner cartridges are kept in the cupboard next "
    "to the printer. The printer sends a notification when a print job finishes. "
)
PASSWORD = (
    "Your account password must be changed every ninety days. A new password needs at least "
    "fourteen characters. The self-service portal lets you reset a forgotten password. After "
    "five wrong attempts the account is locked for fifteen minutes. Passwords you used before "
    "cannot be chosen again. Never share your password with anyone. "
)


def test_the_figures_agree_and_static_boundaries_run_no_sentence(tmp_path: Path) -> None:
    (tmp_path / "office.md").write_text(f"# Office\n\n## Notes\n\n{PRINTER * 2}{PASSWORD * 2}\n")
    (tmp_path / "vpn.md").write_text("# VPN\n\n## Connect\n\n1. Open the client.\n2. Sign in.\n")
    (tmp_path / "mail.txt").write_text(PASSWORD)
    printed = io.StringIO()

    with contextlib.redirect_stdout(printed):
        assert bench_embed.main(["--corpus", str(tmp_path), "--json", "--torch-threads", "1"]) == 0
    figures = json.loads(printed.getvalue())

    assert figures["documents"] == 3
    semantic, static = figures["semantic"], figures["static"]
    assert semantic["chunks"] >= 3
    assert semantic["sentences_embedded"] > 0  # the long section is measured by the model
    assert static["sentences_embedded"] == 0
    assert static["boundaries_s"] == 0
    assert figures["model_chunks_per_s"] > 0
    assert figures["word_pieces_per_chunk"] > 0
    total = figures["extract_s"] + semantic["chunk_s"] + figures["embed_s"]
    assert semantic["pipeline_chunks_per_s"] == round(semantic["chunks"] / total, 1)
