"""Tests on the stack most modules can share: every service as ``deskpilot up`` starts it (the
crawler off) with :data:`tests.support.stack.SHARED_ENV` and the Slack, Teams and MCP channels
on (pointed at local fakes of Slack and the Bot Framework), started once for this package
(tests/shared/conftest.py) and stopped after its last test.

A module belongs here when its tests need no settings of their own and leave nothing behind that
another module's answers depend on: each asks its own questions, under its own users and
conversations, about its own documents. Each is marked
``pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("shared-stack")]`` so that one xdist
worker runs them all and the stack starts once.
"""
