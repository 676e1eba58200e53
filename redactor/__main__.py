"""``python -m redactor``: one redactor process (NER is CPU-heavy; scale by starting more)."""

import sys

from contracts.runtime import run
from redactor.app import create_worker

if __name__ == "__main__":
    sys.exit(run(create_worker))
