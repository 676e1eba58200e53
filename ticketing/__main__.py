"""``python -m ticketing``: one ticketing process (files tickets, links incidents, watches the
status page). Exits non-zero when the bus stops on its own, so a supervisor restarts it."""

import sys

from contracts.runtime import run
from ticketing.app import create_worker

if __name__ == "__main__":
    sys.exit(run(create_worker))
