"""The ``deskpilot`` command line: one module per command, and what several commands share.

:mod:`~deploy.cli.main` builds the parser and dispatches (the ``deskpilot`` console script, also
``python -m deploy.cli``). The commands that feed and operate a stack: ``ingest``, ``reindex``,
``cases``, ``tickets``, ``crawl``, ``ask``, ``redact``, ``purge``, ``dlq`` and ``asyncapi`` (the
bus's AsyncAPI document). Shared by them: :mod:`~deploy.cli.stackaccess` (where the stack a
command works on keeps its Chroma and Redis) and :mod:`~deploy.cli.crawlfleet` (crawl jobs run
from outside the stack's fleet, also used by ``deskpilot bench crawl``). ``up`` is the embedded
runner, :mod:`deploy.runner`; ``eval`` and ``screenshots`` are in :mod:`deploy.evals`, ``bench``
in :mod:`deploy.bench`.
"""
