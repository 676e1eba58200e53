"""``python -m orchestrator``: one orchestrator process; scale by starting more."""

import sys

from contracts.runtime import run
from orchestrator.app import create_worker

if __name__ == "__main__":
    sys.exit(run(create_worker))
