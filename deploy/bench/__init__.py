"""The benchmarks of ``deskpilot bench``, which print figures: ``chat`` (:mod:`~deploy.bench.chat`:
a turn through the running stack against the in-process floor) and ``crawl``
(:mod:`~deploy.bench.crawl`: the crawler fleet against the reference crawlers of
:mod:`~deploy.bench.crawl_baseline`, run in a process of their own) and ``start``
(:mod:`~deploy.bench.start`: what a stack's start costs, with and without the fork server) and
``permissions`` (:mod:`~deploy.bench.permissions`: retrieval with and without permission
filtering on a synthetic corpus).
"""
