"""``python -m crawler``: one crawler worker (a browser pool reading the shared task stream).

Run as many as the load needs; they share every job through Redis. Exits non-zero when the bus
stops by itself, so a supervisor restarts it.
"""

import sys

from contracts.runtime import run
from crawler.app import create_worker

if __name__ == "__main__":
    sys.exit(run(create_worker))
