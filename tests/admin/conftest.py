"""The admin tests' stack: every service as ``deskpilot up`` starts it, with
:data:`tests.admin.STACK_ENV`, once for the package (its modules share the xdist group
``admin-stack``, so they run in one worker)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deploy.runner import Stack
from tests.admin import STACK_ENV
from tests.support.stack import running_stack


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("admin-stack"), STACK_ENV) as running:
        yield running
