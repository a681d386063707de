"""The plan's alert routing: who hears each alert, and where its runbook is.

Every region has one SNS topic, `<name>-<region>-alerts` (components.alarms): CloudWatch alarms
(the load balancer's 5xx and latency) publish to it, and so does Alertmanager for `email`
receivers. Chat and paging receivers (`slack`, `pagerduty`, `webhook`) are Alertmanager's
own: their credentials stay in a Kubernetes Secret you create in the `monitoring` namespace,
mounted into Alertmanager and read through its `*_file` settings, so no credential is in the
plan, the rendered files or the Pulumi state."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from llmfleet.data import Data

Severity = Literal["critical", "warning"]
SEVERITIES: tuple[Severity, ...] = ("critical", "warning")
SECRET_NAME = r"^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$"
SECRET_KEY = r"^[-._a-zA-Z0-9]+$"
DEFAULT_RUNBOOK_URL = "docs/runbook.md"


class SecretRef(Data):
    """A key of a Secret you create in the `monitoring` namespace (Alertmanager mounts it)."""

    secret_name: str = Field(
        pattern=SECRET_NAME,
        description="A Secret you create in the monitoring namespace of each cluster.",
    )
    secret_key: str = Field(pattern=SECRET_KEY, description="Its key holding the credential.")


class SlackTarget(SecretRef):
    """The key holds a Slack incoming-webhook URL (Alertmanager `api_url_file`)."""

    channel: str = Field(min_length=1, description="e.g. #llm-alerts")


class PagerDutyTarget(SecretRef):
    """The key holds a PagerDuty Events API v2 routing key (`routing_key_file`)."""


class WebhookTarget(SecretRef):
    """The key holds the URL Alertmanager posts its webhook payload to (`url_file`)."""


class EmailTarget(Data):
    """Addresses subscribed to the region's SNS alert topic (each confirms once by mail);
    they get Alertmanager's alerts of the receiver's severities and every CloudWatch alarm."""

    addresses: list[str] = Field(
        min_length=1,
        description="E-mail addresses subscribed to each region's SNS alert topic (each "
        "confirms the subscription mail).",
    )

    @model_validator(mode="after")
    def _addresses(self) -> EmailTarget:
        bad = [a for a in self.addresses if a.count("@") != 1 or " " in a]
        if bad:
            raise ValueError(f"not e-mail addresses: {', '.join(bad)}")
        return self


class Receiver(Data):
    """One place alerts go: exactly one of slack, pagerduty, webhook or email."""

    name: str = Field(
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", description="The receiver's DNS-safe name."
    )
    severities: list[Severity] = Field(
        default_factory=lambda: list(SEVERITIES),
        min_length=1,
        description="critical pages someone; warning opens a ticket.",
    )
    slack: SlackTarget | None = Field(default=None, description="A Slack channel.")
    pagerduty: PagerDutyTarget | None = Field(
        default=None, description="A PagerDuty service (its Events v2 routing key)."
    )
    webhook: WebhookTarget | None = Field(default=None, description="A webhook URL.")
    email: EmailTarget | None = Field(
        default=None, description="E-mail through the region's SNS topic."
    )

    @property
    def targets(self) -> list[str]:
        return [k for k in ("slack", "pagerduty", "webhook", "email") if getattr(self, k)]

    @model_validator(mode="after")
    def _one_target(self) -> Receiver:
        if len(self.targets) != 1:
            given = ", ".join(self.targets) or "none"
            raise ValueError(
                f"receiver {self.name!r} has {given}: give exactly one target, e.g. "
                "pagerduty: {secret_name: alertmanager-receivers, secret_key: routing-key} or "
                "email: {addresses: [oncall@example.com]}"
            )
        return self


class Alerting(Data):
    receivers: list[Receiver] = Field(
        default_factory=list, description="Where alerts go; production needs one for critical."
    )
    runbook_url: str = Field(
        default=DEFAULT_RUNBOOK_URL,
        min_length=1,
        description="Base of every alert's runbook link (`<runbook_url>#<anchor>`); default "
        "the repository's docs/runbook.md.",
    )

    @model_validator(mode="after")
    def _unique(self) -> Alerting:
        names = [r.name for r in self.receivers]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"alerts.receivers names twice: {', '.join(twice)}")
        return self
