"""The shared stack (see tests/shared/__init__.py), one per package run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deploy.runner import Stack
from tests.support.stack import SHARED_ENV, running_stack


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("shared-stack"), SHARED_ENV) as running:
        yield running
