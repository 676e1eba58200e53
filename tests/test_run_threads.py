"""The processes of a test run give their native thread pools one thread each (the root
conftest.py's ``ONE_THREAD_PER_PROCESS``): two xdist workers and the stacks' services keep both
cores busy, so a second thread per pool only spun waiting for a core (the intent classifier's
fit cost 7-9 CPU-s with two OpenBLAS threads, 0.5 with one)."""

from __future__ import annotations

import json
import subprocess
import sys

from ocr.config import OcrSettings
from tests.support import REPO_ROOT

POOLS_OF_A_CHILD = """
import json
import numpy, scipy.linalg, sklearn.linear_model  # their OpenBLAS and OpenMP libraries
from threadpoolctl import threadpool_info
print(json.dumps([[pool["internal_api"], pool["num_threads"]] for pool in threadpool_info()]))
"""


def test_a_process_the_tests_start_has_one_openblas_and_openmp_thread() -> None:
    done = subprocess.run(
        [sys.executable, "-c", POOLS_OF_A_CHILD],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    pools = json.loads(done.stdout.strip().splitlines()[-1])
    assert {api for api, _ in pools} >= {"openblas", "openmp"}, pools
    assert {threads for _, threads in pools} == {1}, pools


def test_the_ocr_service_reads_with_one_torch_thread() -> None:
    assert OcrSettings().torch_threads == 1
