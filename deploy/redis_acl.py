"""Redis ACL users for Deskpilot: each service reaches its own keys and the streams it uses, and
nothing else.

One user per service, plus ``keda`` (reads consumer-group lag for the autoscaler),
``deskpilot-admin`` (operators and command-line tools: ``deskpilot dlq``, ``deskpilot purge``)
and ``default`` (no password, may only PING: container health checks). What a service may do:

* its own keys (:data:`OWN_KEYS`, read and write, scripts and transactions); its heartbeat and its
  runtime-configuration defaults; read access to every heartbeat (the health check scans them)
  and to the runtime configuration;
* on each stream its consumer group reads (``contracts.topics.SUBSCRIPTIONS``): read through the
  group, acknowledge, claim, create the group, dead-letter to ``<topic>.dlq``, and delete the
  entries it handled of the streams that are emptied so (``contracts.topics.DELETED_ONCE_HANDLED``:
  raw topics once redacted, uploaded documents and crawled pages once indexed);
* on each stream it publishes (:data:`PUBLISHES`): append and create the readers' groups; the
  workers that answer a turn append to the gateways' reply streams (``reply.*``);
* the gateway also reads stream lengths and group lag of every stream (admin analytics) and reads
  ``audit.log`` back by range.

Anything else is refused with NOPERM: the ocr service cannot read a conversation's turns, the
crawler cannot append to ``ticket.events``, nobody but the redactor reads raw messages, and no
service runs administrative commands (CONFIG, FLUSHALL, KEYS, DEBUG, ...).

``python -m deploy.redis_acl secrets`` prints the two Kubernetes Secrets with fresh random
passwords: ``deskpilot-redis-acl`` (the ACL file for the Redis StatefulSet, passwords stored as
SHA-256 hashes) and ``deskpilot-redis-users`` (each service's ``REDIS_URL``, KEDA's credentials).
``--placeholders`` prints what the repository ships. ``python -m deploy.redis_acl acl`` prints
only the ACL file, ``--format setuser`` the same rules as ``ACL SETUSER`` commands for a managed
Redis. ``tests/test_redis_acl.py`` holds these rules against the code (which topics each service
publishes and reads, which key prefixes it uses) and against a real server.
"""

from __future__ import annotations

import argparse
import hashlib
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from contracts.topics import (
    DELETED_ONCE_HANDLED,
    DLQ_SUFFIX,
    REPLY_PREFIX,
    SUBSCRIPTIONS,
    Group,
    Topic,
)

SERVICES: tuple[str, ...] = tuple(group.value for group in Group)
KEDA_USER = "keda"
ADMIN_USER = "deskpilot-admin"
REPLY_STREAMS = f"{REPLY_PREFIX}*"

OWN_KEYS: dict[str, tuple[str, ...]] = {
    "gateway": ("deskpilot:gateway:*", "deskpilot:ratelimit:*"),
    "redactor": ("deskpilot:redactor:*",),
    "ocr": (),
    "orchestrator": ("deskpilot:orchestrator:*",),
    # With CRAWLER_NAMESPACE set, the crawler's keys and streams carry that prefix: render the
    # rules for it with --crawler-namespace.
    "crawler": ("crawler:*",),
    # The sources' catalogue (contracts.sources), which the gateway reads (READS below).
    "indexer": ("deskpilot:indexer:*", "deskpilot:sources:*"),
    "ticketing": ("deskpilot:ticketing:*",),
}
"""Key patterns each service keeps its own state under (read and write)."""

PUBLISHES: dict[str, frozenset[str]] = {
    "gateway": frozenset(
        {
            Topic.MESSAGE_RECEIVED,
            Topic.ATTACHMENT_RECEIVED,
            Topic.AUDIT,
            Topic.CONVERSATION_PURGED,
            Topic.DOCUMENT_SUBMITTED,
            Topic.DOCUMENT_DELETED,
            Topic.FEEDBACK_RECEIVED,
            Topic.INCIDENT_RECEIVED,
            Topic.SEARCH_RECEIVED,
            Topic.SOURCE_SYNC_REQUESTED,
            Topic.SOURCE_DRAFT_REQUESTED,
        }
    ),
    "redactor": frozenset(
        {
            Topic.QUERY_RECEIVED,
            Topic.ATTACHMENT_REDACTED,
            Topic.AUDIT,
            Topic.FEEDBACK_RECORDED,
            Topic.INCIDENT_REPORTED,
            Topic.SEARCH_REQUESTED,
        }
    ),
    "ocr": frozenset({Topic.ATTACHMENT_EXTRACTED}),
    "orchestrator": frozenset(
        {
            Topic.AUDIT,
            Topic.CONTEXT_INSUFFICIENT,
            Topic.CRAWL_STOP,
            Topic.ESCALATION_REQUESTED,
            Topic.TICKET_STATUS_REQUESTED,
            Topic.NOTICE_UNANSWERED,
        }
    ),
    "crawler": frozenset(
        {Topic.PAGES_CRAWLED, Topic.CRAWL_FINISHED, Topic.CRAWL_TASKS, Topic.SITE_MAPPED}
    ),
    "indexer": frozenset(
        {
            Topic.AUDIT,
            Topic.CHUNKS_INDEXED,
            Topic.DOCUMENT_STATUS,
            Topic.PROPOSALS,
            Topic.SOURCE_SYNC_REQUESTED,
            Topic.SOURCE_SYNC_COMPLETED,
            Topic.SOURCE_DRAFT_COMPLETED,
        }
    ),
    "ticketing": frozenset({Topic.AUDIT, Topic.INCIDENT_REPORTED, Topic.TICKET_EVENTS}),
}
"""Topics each service appends to."""

REPLIES: frozenset[str] = frozenset({"redactor", "ocr", "orchestrator", "crawler"})
"""Services that append progress, answers or errors to a gateway's reply stream."""

INSPECTS: dict[str, tuple[str, ...]] = {"gateway": ("*",)}
"""Services that read length and group lag of streams (``*``: every topic, its dead letters and
the reply streams); the gateway's admin analytics."""

READS: dict[str, tuple[str, ...]] = {
    "gateway": ("deskpilot:sources:*",),
    "orchestrator": ("deskpilot:sources:*",),
}
"""Keys of another service a service reads: the admin API lists the indexer's sources, retrieval
reads which generation of each synced document it may show (contracts.live)."""

RANGE_READS: dict[str, frozenset[str]] = {"gateway": frozenset({Topic.AUDIT})}
"""Streams a service reads by range, outside a group (the admin API's audit view)."""

MEASURES: dict[str, frozenset[str]] = {"gateway": frozenset({Topic.ATTACHMENT_RECEIVED})}
"""Streams whose memory a service measures (the gateway's upload gate caps the bytes waiting
for OCR with ``MEMORY USAGE``, gateway/uploads.py)."""

# Commands, by what they are for. Later rules win, so -@dangerous comes after the categories.
CONNECTION = "+@connection -@dangerous"
DATA = (
    "+@read +@write +@keyspace +@transaction "
    "+eval +evalsha +eval_ro +evalsha_ro +script|load +script|exists -@dangerous -function"
)
"""On the user's own keys. FUNCTION's subcommands touch no key (FLUSH drops every library), so
they go; scripts are EVAL/EVALSHA, whose keys the ACL checks."""
CONSUME = "+xreadgroup +xack +xautoclaim +xclaim +xpending +xgroup|create +xinfo|groups"
"""Reading a stream through a group, and its lag and pending counts (``XINFO GROUPS``) for the
service's metrics (contracts/metrics.py), the same numbers KEDA scales on."""
PUBLISH = "+xadd +xgroup|create"
DEAD_LETTER = "+xadd"
DELETE_HANDLED = "+xdel"
INSPECT = "+xlen +xinfo|groups"
RANGE = "+xrange +xrevrange"
LAG = "+xinfo|groups +xlen +xpending"
MEASURE = "+memory|usage"


@dataclass(frozen=True)
class ServiceAccess:
    """What one service's Redis user may touch."""

    service: str
    own_keys: tuple[str, ...]
    consumes: tuple[str, ...]
    publishes: tuple[str, ...]

    @property
    def dead_letters(self) -> tuple[str, ...]:
        return tuple(f"{stream}{DLQ_SUFFIX}" for stream in self.consumes)

    @property
    def deletes(self) -> tuple[str, ...]:
        """The streams it deletes the entries of once handled."""
        return tuple(stream for stream in self.consumes if stream in DELETED_ONCE_HANDLED)


def streams(namespace: str = "") -> list[str]:
    """Every topic's stream, with the crawler's namespace applied to its streams."""
    return sorted(_crawler_stream(topic, namespace) for topic in Topic)


_CRAWLER_TOPICS = frozenset(
    {
        Topic.CONTEXT_INSUFFICIENT,
        Topic.CRAWL_TASKS,
        Topic.CRAWL_STOP,
        Topic.PAGES_CRAWLED,
        Topic.CRAWL_FINISHED,
        Topic.SITE_MAPPED,
    }
)


def _crawler_stream(topic: str, namespace: str) -> str:
    """The stream name the crawler uses for ``topic`` (crawler/service.py's ``Topics``)."""
    return f"{namespace}.{topic}" if namespace and topic in _CRAWLER_TOPICS else str(topic)


def access(service: str, crawler_namespace: str = "") -> ServiceAccess:
    """The streams and keys ``service`` needs, from contracts.topics and the tables above."""
    group = Group(service)
    consumed = [str(t) for t, groups in SUBSCRIPTIONS.items() if group in groups]
    if group is Group.GATEWAY:
        consumed.append(REPLY_STREAMS)
    published = [str(t) for t in PUBLISHES[service]]
    if service in REPLIES:
        published.append(REPLY_STREAMS)
    own = OWN_KEYS[service]
    if group is Group.CRAWLER and crawler_namespace:
        consumed = [_crawler_stream(s, crawler_namespace) for s in consumed]
        published = [_crawler_stream(s, crawler_namespace) for s in published]
        own = tuple(f"{crawler_namespace}:{pattern}" for pattern in own)
    return ServiceAccess(service, own, tuple(sorted(consumed)), tuple(sorted(published)))


def _keys(patterns: tuple[str, ...] | list[str], prefix: str = "~") -> str:
    return " ".join(f"{prefix}{pattern}" for pattern in patterns)


def _selector(patterns: tuple[str, ...] | list[str], commands: str, prefix: str = "~") -> str:
    return f"({_keys(patterns, prefix)} {commands})"


def service_rules(service: str, crawler_namespace: str = "") -> str:
    """The ACL rules of ``service``'s user, without its password."""
    a = access(service, crawler_namespace)
    keys = [
        *a.own_keys,
        f"deskpilot:heartbeat:{service}:*",
        f"deskpilot:config:defaults:{service}",
    ]
    if service == Group.GATEWAY:
        keys.append("deskpilot:config:runtime")
    parts = [
        "resetkeys resetchannels -@all",
        CONNECTION,
        DATA,
        _keys(keys),
        _keys(["deskpilot:heartbeat:*", "deskpilot:config:*", *READS.get(service, ())], "%R~"),
    ]
    if a.consumes:
        parts.append(_selector(a.consumes, CONSUME))
        parts.append(_selector(a.dead_letters, DEAD_LETTER))
    if a.deletes:
        parts.append(_selector(a.deletes, DELETE_HANDLED))
    if a.publishes:
        parts.append(_selector(a.publishes, PUBLISH))
    if service in INSPECTS:
        everything = [*streams(crawler_namespace), REPLY_STREAMS]
        inspected = [*everything, *(f"{s}{DLQ_SUFFIX}" for s in everything[:-1])]
        parts.append(_selector(inspected, INSPECT, "%R~"))
    if service in RANGE_READS:
        parts.append(_selector(sorted(RANGE_READS[service]), RANGE, "%R~"))
    if service in MEASURES:
        parts.append(_selector(sorted(MEASURES[service]), MEASURE, "%R~"))
    return " ".join(parts)


def keda_rules(crawler_namespace: str = "") -> str:
    """KEDA's redis-streams scaler reads a group's lag (XINFO GROUPS) and nothing else."""
    return " ".join(
        [
            "resetkeys resetchannels -@all",
            CONNECTION,
            LAG,
            _keys(streams(crawler_namespace), "%R~"),
        ]
    )


ADMIN_RULES = "resetkeys resetchannels ~* &* +@all"
DEFAULT_RULES = "nopass resetkeys resetchannels -@all +ping"
"""Unauthenticated clients may PING (health checks) and nothing else."""


def users() -> list[str]:
    """Every user name the ACL defines, ``default`` first."""
    return ["default", *SERVICES, KEDA_USER, ADMIN_USER]


def placeholder_passwords() -> dict[str, str]:
    """The passwords the repository's manifests ship with: replace them (``secrets``)."""
    return {name: f"change-me-{name}" for name in users() if name != "default"}


def random_passwords() -> dict[str, str]:
    return {name: secrets.token_hex(24) for name in users() if name != "default"}


def password_hash(password: str) -> str:
    """How an ACL file stores a password (``#<sha256>``), so the file holds no clear text."""
    return "#" + hashlib.sha256(password.encode()).hexdigest()


def rules(name: str, crawler_namespace: str = "") -> str:
    """The rules of user ``name`` (without ``on`` and the password)."""
    if name == "default":
        return DEFAULT_RULES
    if name == KEDA_USER:
        return keda_rules(crawler_namespace)
    if name == ADMIN_USER:
        return ADMIN_RULES
    return service_rules(name, crawler_namespace)


def render_acl(
    passwords: Mapping[str, str], crawler_namespace: str = "", style: str = "file"
) -> str:
    """The ACL file (``style="file"``) or the same users as ``ACL SETUSER`` commands."""
    lines = []
    for name in users():
        credential = "" if name == "default" else f"{password_hash(passwords[name])} "
        user = f"{name} on {credential}{rules(name, crawler_namespace)}"
        lines.append(f"ACL SETUSER {user}" if style == "setuser" else f"user {user}")
    return "\n".join(lines) + "\n"


def redis_url(user: str, password: str, host: str, port: int, db: int, tls: bool) -> str:
    scheme = "rediss" if tls else "redis"
    return f"{scheme}://{quote(user, safe='')}:{quote(password, safe='')}@{host}:{port}/{db}"


def render_secrets(
    passwords: Mapping[str, str],
    *,
    host: str = "redis",
    port: int = 6379,
    db: int = 0,
    tls: bool = False,
    crawler_namespace: str = "",
) -> str:
    """The Secrets ``deskpilot-redis-acl`` (the ACL file for the Redis server) and
    ``deskpilot-redis-users`` (each service's REDIS_URL and KEDA's credentials), as YAML."""
    acl = render_acl(passwords, crawler_namespace)
    acl_block = "\n".join(f"    {line}" for line in acl.splitlines())
    urls = "\n".join(
        f"  {name}: {redis_url(name, passwords[name], host, port, db, tls)}"
        for name in (*SERVICES, ADMIN_USER)
    )
    return f"""\
# Generated by `python -m deploy.redis_acl secrets`: the ACL file the Redis server loads, with
# passwords as SHA-256 hashes. Only the Redis StatefulSet mounts it.
apiVersion: v1
kind: Secret
metadata:
  name: deskpilot-redis-acl
  labels:
    app.kubernetes.io/name: redis
    app.kubernetes.io/part-of: deskpilot
type: Opaque
stringData:
  users.acl: |
{acl_block}
---
# Generated by `python -m deploy.redis_acl secrets`: each service's REDIS_URL (its own ACL user),
# read by that service's Deployment only (secretKeyRef), KEDA's user for the lag of the scaled
# groups, and the operators' URL for the command-line tools (read by no pod).
apiVersion: v1
kind: Secret
metadata:
  name: deskpilot-redis-users
  labels:
    app.kubernetes.io/part-of: deskpilot
type: Opaque
stringData:
{urls}
  keda-username: {KEDA_USER}
  keda-password: {passwords[KEDA_USER]}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.redis_acl", description=__doc__)
    parser.add_argument(
        "--crawler-namespace", default="", help="CRAWLER_NAMESPACE, if the crawler has one"
    )
    parser.add_argument(
        "--placeholders",
        action="store_true",
        help="the repository's placeholder passwords instead of random ones",
    )
    what = parser.add_subparsers(dest="what", required=True)
    secrets_cmd = what.add_parser("secrets", help="both Kubernetes Secrets, as YAML")
    secrets_cmd.add_argument("--host", default="redis")
    secrets_cmd.add_argument("--port", type=int, default=6379)
    secrets_cmd.add_argument("--db", type=int, default=0)
    secrets_cmd.add_argument("--tls", action="store_true", help="rediss:// URLs")
    acl_cmd = what.add_parser("acl", help="the ACL file (or ACL SETUSER commands)")
    acl_cmd.add_argument("--format", choices=["file", "setuser"], default="file")
    args = parser.parse_args(argv)
    passwords = placeholder_passwords() if args.placeholders else random_passwords()
    if args.what == "secrets":
        sys.stdout.write(
            render_secrets(
                passwords,
                host=args.host,
                port=args.port,
                db=args.db,
                tls=args.tls,
                crawler_namespace=args.crawler_namespace,
            )
        )
    else:
        sys.stdout.write(render_acl(passwords, args.crawler_namespace, args.format))
        if not args.placeholders:
            for name, password in passwords.items():
                print(f"{name}: {password}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
