"""``deskpilot ask``: ask the running stack a question, and go on with the conversation.

The gateway ties every conversation to its owner. ``ask`` asks as an anonymous user: the first
time it talks to a gateway it asks that gateway for an anonymous token (``POST /api/anonymous``)
and keeps it in a token file, one token per gateway URL, readable by you alone. Every later
``ask`` to that gateway uses the same token, so ``--conversation-id`` (the id an earlier answer
printed) continues a conversation this token file started; nobody else's can be continued.

The token is the only key to those conversations: whoever has the file can read and continue
them. When the gateway refuses it (it expired, or the gateway's key changed), a new question
gets a new token; a conversation of the old one cannot be continued any more.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

KEPT_TOKENS_FILE = "anonymous-tokens.json"


def default_token_file() -> Path:
    """``anonymous-tokens.json`` in the user's state directory for Deskpilot
    (``$XDG_STATE_HOME/deskpilot`` or ``~/.local/state/deskpilot`` on Linux)."""
    from platformdirs import user_state_path

    return user_state_path("deskpilot") / KEPT_TOKENS_FILE


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``ask`` to ``deskpilot``'s sub-commands (``parser.add_subparsers()``)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "ask",
        help="ask the running stack a question (as an anonymous user whose token it keeps)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("question")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the gateway")
    parser.add_argument(
        "--conversation-id",
        default=None,
        help="continue this conversation (an earlier answer's conversation id, asked with the "
        "same token file)",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        default=None,
        help="where the anonymous tokens are kept, one per gateway URL "
        f"(default: {KEPT_TOKENS_FILE} in the user's state directory for deskpilot)",
    )
    parser.add_argument("--json", action="store_true", help="print exactly the /api/chat response")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.set_defaults(run=run_ask)
    return parser


@dataclass(frozen=True)
class KeptToken:
    """An anonymous token the gateway issued, as the token file keeps it."""

    token: str
    user_id: str
    expires_at: int


class TokenFile:
    """The anonymous tokens ``ask`` keeps, one per gateway URL, in a file only its owner reads.

    A file that cannot be read as tokens is treated as empty (and replaced on the next write):
    the worst it costs is a new anonymous user."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, Any]:
        try:
            kept = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return kept if isinstance(kept, dict) else {}

    def get(self, gateway: str) -> KeptToken | None:
        entry = self._read().get(gateway)
        if not isinstance(entry, dict):
            return None
        token, user_id, expires_at = (entry.get(k) for k in ("token", "user_id", "expires_at"))
        if not (isinstance(token, str) and isinstance(user_id, str)):
            return None
        if not isinstance(expires_at, int):
            return None
        return KeptToken(token=token, user_id=user_id, expires_at=expires_at)

    def put(self, gateway: str, kept: KeptToken) -> None:
        """Keep ``kept`` for ``gateway``, replacing the file at once (never half written) with
        one only its owner may read."""
        tokens = self._read()
        tokens[gateway] = {
            "token": kept.token,
            "user_id": kept.user_id,
            "expires_at": kept.expires_at,
        }
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".tokens-", dir=self.path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:  # mkstemp: mode 0600
                json.dump(tokens, out, indent=2)
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def new_anonymous_token(client: httpx.Client, gateway: str) -> KeptToken:
    """A new anonymous user of ``gateway`` and its token (``POST /api/anonymous``)."""
    response = client.post(f"{gateway}/api/anonymous")
    response.raise_for_status()
    body = response.json()
    return KeptToken(
        token=str(body["anonymous_token"]),
        user_id=str(body["user_id"]),
        expires_at=int(body["expires_at"]),
    )


def run_ask(args: argparse.Namespace) -> int:
    import httpx

    gateway = args.url.rstrip("/")
    tokens = TokenFile(args.token_file or default_token_file())
    payload: dict[str, Any] = {"text": args.question}
    if args.conversation_id:
        payload["conversation_id"] = args.conversation_id
    kept = tokens.get(gateway)
    if kept is None and args.conversation_id:
        print(
            f"deskpilot ask: no token for {gateway} in {tokens.path}: a conversation can only be "
            "continued with the token file that started it",
            file=sys.stderr,
        )
        return 1
    try:
        with httpx.Client(timeout=args.timeout) as client:
            if kept is None:
                kept = new_anonymous_token(client, gateway)
                tokens.put(gateway, kept)
            response = _post_chat(client, gateway, payload, kept)
            if response.status_code == 401 and not args.conversation_id:
                # Expired, or the gateway's key changed: a new question needs no old token.
                kept = new_anonymous_token(client, gateway)
                tokens.put(gateway, kept)
                response = _post_chat(client, gateway, payload, kept)
    except httpx.HTTPError as exc:
        print(f"deskpilot ask: cannot reach {args.url}: {exc}", file=sys.stderr)
        return 2
    try:
        body = response.json()
    except ValueError:
        status = response.status_code
        print(f"deskpilot ask: error {status} (not a Deskpilot answer)", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(body))
        return 0 if response.is_success else 1
    if not response.is_success:
        print(f"error {response.status_code}: {body.get('detail')}", file=sys.stderr)
        if response.status_code == 401:
            print(
                "deskpilot ask: the gateway no longer accepts the kept token; ask without "
                "--conversation-id to start a new conversation",
                file=sys.stderr,
            )
        return 1
    print(body["answer"])
    if body["citations"]:
        print()
        for citation in body["citations"]:
            print(f"[{citation['n']}] {citation['title']} — {citation['url']}")
    conversation = body["conversation_id"]
    print(f"\n(conversation {conversation}: continue it with --conversation-id {conversation})")
    return 0


def _post_chat(
    client: httpx.Client, gateway: str, payload: dict[str, Any], kept: KeptToken
) -> httpx.Response:
    return client.post(
        f"{gateway}/api/chat",
        json=payload,
        headers={"Authorization": f"Bearer {kept.token}"},
    )
