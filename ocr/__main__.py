"""``python -m ocr``: one attachment reader (OCR is CPU-heavy; scale by starting more).

Heavy imports (torch, EasyOCR) happen in the worker's lifespan, not here, so a broken model install
fails the start visibly and a supervisor restarts the process on a non-zero exit.
"""

import sys

from contracts.runtime import run
from ocr.app import create_worker

if __name__ == "__main__":
    sys.exit(run(create_worker))
