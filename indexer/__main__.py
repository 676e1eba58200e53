"""``python -m indexer``: one indexer process."""

import sys

from contracts.runtime import run
from indexer.app import create_worker

if __name__ == "__main__":
    sys.exit(run(create_worker))
