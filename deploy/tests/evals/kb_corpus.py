"""Three help articles written as a knowledge-base folder, for the retrieval evaluation's tests."""

from __future__ import annotations

from pathlib import Path

VPN = """---
title: Reset your VPN password
---

Your VPN password expires every 180 days. Reset it in the self-service portal.

1. Open the self-service portal.
2. Choose Change VPN password and type the new password twice.
"""
PRINTER = """# Add a network printer

Every floor has a shared laser printer. Add it once and print from any application.

1. Open Settings and choose Printers and scanners.
2. Click Add device and pick the printer named after your floor.
"""
WEBCAM = """# Fix a webcam that shows a black image

Close other apps that use the camera, such as Teams or Zoom, then slide the privacy shutter open.
"""


def write_corpus(tmp_path: Path) -> Path:
    """The three articles as a knowledge-base folder under ``tmp_path`` (one in a subfolder)."""
    corpus = tmp_path / "kb"
    (corpus / "hardware").mkdir(parents=True)
    (corpus / "vpn-password.md").write_text(VPN)
    (corpus / "hardware" / "printer.md").write_text(PRINTER)
    (corpus / "webcam.md").write_text(WEBCAM)
    return corpus
