"""What stack tests of the Slack and Teams channels share: the gateway's settings pointing at the
local platforms (tests/support/fake_slack.py, fake_teams.py), and waiting for the answers they
receive."""

from __future__ import annotations

from tests.support import wait_until_sync
from tests.support.fake_slack import BOT_TOKEN, SIGNING_SECRET, FakeSlack, Posted
from tests.support.fake_teams import APP_PASSWORD, FakeTeams, Sent


def channel_env(slack: FakeSlack, teams: FakeTeams) -> dict[str, str]:
    """Slack and Teams on, pointed at the local fakes."""
    return {
        "GATEWAY_TEAMS_APP_ID": teams.app_id,
        "GATEWAY_TEAMS_APP_PASSWORD": APP_PASSWORD,
        "GATEWAY_TEAMS_OPENID_URL": teams.openid_url,
        "GATEWAY_TEAMS_TOKEN_URL": teams.token_url,
        "GATEWAY_TEAMS_SERVICE_URL_PREFIXES": teams.service_url,
        "GATEWAY_SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "GATEWAY_SLACK_BOT_TOKEN": BOT_TOKEN,
        "GATEWAY_SLACK_API_URL": slack.api_url,
        "GATEWAY_SLACK_RESPONSE_URL_PREFIX": slack.hooks_prefix,
    }


def teams_cards(teams: FakeTeams, conversation: str, count: int) -> list[Sent]:
    """The conversation's cards (the bot's messages with attachments) once there are
    ``count``."""

    def found() -> list[Sent] | None:
        done = [s for s in teams.messages(conversation) if s.activity.get("attachments")]
        return done if len(done) >= count else None

    return wait_until_sync(found, 120, message=lambda: str(teams.sent))


def slack_answers(slack: FakeSlack, channel: str, thread: str, count: int) -> list[Posted]:
    """The thread's answers (messages with blocks) once there are ``count``."""

    def found() -> list[Posted] | None:
        done = [m for m in slack.thread(channel, thread) if m.blocks]
        return done if len(done) >= count else None

    return wait_until_sync(found, 120, message=lambda: str(slack.thread(channel, thread)))
