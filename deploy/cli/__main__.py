"""``python -m deploy.cli``: the ``deskpilot`` command line, without the installed script."""

import sys

from deploy.cli.main import main

sys.exit(main())
