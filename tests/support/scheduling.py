"""How ``pytest -n N --dist loadgroup`` (pytest-xdist) shares the tests out: a pytest plugin.

Tests that share module- or package-scoped fixtures must run in one worker, or each worker would
build them again (a whole stack of services, say). So every module is one unit of work, and so is
every ``xdist_group``: modules sharing one stack each mark themselves
``pytest.mark.xdist_group("shared-stack")``. Units whose tests start the whole stack (marked
``pytest.mark.slow``) are handed out first: a long unit started last would keep one worker busy
while the other idles.

The controller of an xdist run sees node ids only, and with pytest 9.2 xdist can no longer add a
test's group to its node id (pytest-xdist issue 1386), so the scheduler reads both marks from the
module's source, where they are written at module level (``pytestmark``). The root conftest.py
loads this plugin; other ``--dist`` modes are left to xdist.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling

SLOW_PREFIX = "slow:"
"""Units whose name starts with this start the whole stack; they are scheduled first."""
_GROUP = re.compile(r"""xdist_group\(\s*(?:name\s*=\s*)?["']([^"']+)["']""")
_SLOW = re.compile(r"pytest\.mark\.slow\b")


@functools.cache
def unit_of_module(path: Path, group: str | None = None) -> str:
    """The unit of work of the module at ``path``: its xdist group (``group`` if xdist named it)
    or the module itself, prefixed ``slow:`` when it starts the whole stack."""
    try:
        source = path.read_text(errors="replace")
    except OSError:
        source = ""
    if group is None:
        marked = _GROUP.search(source)
        group = marked.group(1) if marked else path.as_posix()
    return f"{SLOW_PREFIX}{group}" if _SLOW.search(source) else group


class ModuleOrGroupScheduling(LoadGroupScheduling):
    """xdist's ``loadgroup`` scheduling with a module (or its group), never a single test, as
    the unit of work, and the slow units first."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self.rootpath = config.rootpath

    def _split_scope(self, nodeid: str) -> str:
        group = super()._split_scope(nodeid)  # the group xdist appended to the id, if it could
        module = self.rootpath / nodeid.split("@", 1)[0].split("::", 1)[0]
        return unit_of_module(module, group if group != nodeid else None)

    def _assign_work_unit(self, node: Any) -> None:
        slow = next((s for s in self.workqueue if s.startswith(SLOW_PREFIX)), None)
        if slow is not None:
            self.workqueue.move_to_end(slow, last=False)
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadGroupScheduling | None:
    if config.getvalue("dist") != "loadgroup":
        return None
    return ModuleOrGroupScheduling(config, log)
