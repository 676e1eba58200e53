"""spaCy's matrix products through numpy's BLAS instead of thinc's bundled ``blis``.

The redactor runs a small spaCy pipeline on every message, and about a quarter of that time is
matrix products of a few dozen rows (one per token) by a few hundred columns. thinc's
:class:`~thinc.api.NumpyOps` computes them with ``blis``, built for every processor at once;
numpy's own BLAS (OpenBLAS, with kernels chosen for the processor it runs on) computes the same
products in a third to a half of the time on the machines measured here (a 60 x 288 by 288 x 288
product: 160-190 us against 460-600 us, ``python -m redactor.tests.bench_redact`` prints what a
whole message gains). Only ``gemm`` changes; every other kernel stays thinc's.

The results are the same products in another order of summation, so a score may differ in its
last bits; the redaction evaluations (``deskpilot eval redaction``) are unchanged by it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from spacy.language import Language
from thinc.api import NumpyOps, set_current_ops
from threadpoolctl import threadpool_limits


class MatmulOps(NumpyOps):  # type: ignore[misc]  # thinc's backends are compiled, untyped
    """thinc's numpy backend with ``gemm`` by ``numpy.matmul``."""

    name = "deskpilot-matmul"

    def gemm(
        self,
        x: np.ndarray[Any, Any],
        y: np.ndarray[Any, Any],
        *,
        out: np.ndarray[Any, Any] | None = None,
        trans1: bool = False,
        trans2: bool = False,
    ) -> np.ndarray[Any, Any]:
        """``x @ y`` (each transposed first when asked), into ``out`` when given."""
        if trans1:
            x = x.T
        if trans2:
            y = y.T
        product: np.ndarray[Any, Any] = np.matmul(x, y) if out is None else np.matmul(x, y, out=out)
        return product


MATMUL_OPS = MatmulOps()
"""The backend the redactor's pipelines compute with (it holds no state)."""


def use_numpy_matmul(nlp: Language) -> None:
    """Make every model of ``nlp``'s components compute its products with :class:`MatmulOps`
    (their weights stay where they are: both backends keep them in numpy arrays).

    numpy's BLAS then runs on one thread in this process: products this small gain nothing from
    a second one, and OpenBLAS's threads spin while they wait, which doubled the processor time
    of a message (57 against 29 ms) for one or two milliseconds less latency on an idle machine.
    """
    threadpool_limits(1, user_api="blas")
    ops = MATMUL_OPS
    for _, component in nlp.pipeline:
        model = getattr(component, "model", None)
        if model is None or not hasattr(model, "walk"):
            continue
        for node in model.walk():
            node.ops = ops


def with_matmul_ops() -> None:
    """Make :data:`MATMUL_OPS` the backend of the models thinc builds in this thread's context.

    A pipeline builds a few small models on every call, each asking thinc for the current
    backend. A message is redacted in a worker thread with a copy of the event loop's context,
    where none is set, so thinc looked one up in its registry of backends (reading installed
    packages' entry points) on every message: 0.38 ms each time, measured alone, and 8 % of the
    redactor's samples in a profile of the chat benchmark. Call this first in such a thread; it
    costs a context variable's write."""
    set_current_ops(MATMUL_OPS)
