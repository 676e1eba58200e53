"""``python -m deploy.envdoc``: every environment variable, generated from the settings classes.

The documentation's settings reference (:data:`PAGE`) holds this command's output between the
:data:`BEGIN` and :data:`END` markers; a test keeps the two identical. ``--write`` rewrites the
table there (or in the page given after it) and leaves the rest of the page alone::

    python -m deploy.envdoc --write docs/reference/settings.md
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

COMPUTED = {"default_data_dir": "`~/.deskpilot`", "gethostname": "the host name"}
BEGIN = "<!-- envdoc:begin -->"
END = "<!-- envdoc:end -->"
PAGE = Path("docs/reference/settings.md")
"""The page that holds the table, from the repository's root."""


def _classes() -> list[tuple[str, type[BaseSettings]]]:
    from contracts.settings import LLMEndpointSettings, ServiceSettings
    from contracts.tracing import TracingSettings
    from crawler.config import CrawlerSettings
    from deploy.runner import RunnerSettings
    from gateway.config import GatewaySettings
    from indexer.config import IndexerSettings
    from ocr.config import OcrSettings
    from orchestrator.config import OrchestratorSettings
    from redactor.config import RedactorSettings
    from ticketing.config import TicketingSettings

    return [
        ("all services", ServiceSettings),
        ("tracing (all services)", TracingSettings),
        ("orchestrator, crawler (the LLM)", LLMEndpointSettings),
        ("gateway", GatewaySettings),
        ("redactor", RedactorSettings),
        ("ocr", OcrSettings),
        ("orchestrator", OrchestratorSettings),
        ("indexer", IndexerSettings),
        ("crawler", CrawlerSettings),
        ("ticketing", TicketingSettings),
        ("embedded runner", RunnerSettings),
    ]


def variable(cls: type[BaseSettings], name: str, field: FieldInfo) -> str:
    alias = field.validation_alias
    choices = getattr(alias, "choices", None)
    if choices:
        return str(choices[0])
    if isinstance(alias, str):
        return alias
    prefix = str(cls.model_config.get("env_prefix", ""))
    return f"{prefix}{name}".upper()


def default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
        # Long lists and mappings (category routes, patterns) are summarised, not printed.
        if isinstance(value, list | dict) and len(value) > 4:
            return f"{len(value)} entries"
        if not isinstance(value, list | dict):
            return COMPUTED.get(field.default_factory.__name__, "(computed)")
    else:
        value = field.default
    if value is None or value == "":
        return "unset"
    if hasattr(value, "get_secret_value"):
        return "(placeholder)"
    return f"`{value}`"


def table() -> str:
    rows = ["| variable | service | default | meaning |", "| --- | --- | --- | --- |"]
    seen: set[str] = set()
    for service, cls in _classes():
        for name, field in cls.model_fields.items():
            env = variable(cls, name, field)
            if env in seen:
                continue
            seen.add(env)
            meaning = (field.description or "").replace("|", "\\|").replace("\n", " ")
            shown = default(field).replace("|", "\\|")
            rows.append(f"| `{env}` | {service} | {shown} | {meaning} |")
    return "\n".join(rows)


def with_table(page: str) -> str:
    """``page`` with the text between the envdoc markers replaced by the current table."""
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--write"] and len(args) <= 2:
        path = Path(args[1]) if len(args) == 2 else PAGE
        path.write_text(with_table(path.read_text()))
        return 0
    print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
