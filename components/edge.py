"""EdgeGuard: a region's AWS WAF web ACL, the rate limit of `RegionPlan.entry_point.rate_rule`.

A REGIONAL web ACL in the ALB's region, allowing by default, with a rate-based rule that
blocks a client (its address, or its Authorization header with `per: token`) once it sends
more than `requests` in `window_s` seconds, answering 429 until its rate drops. WAF omits
every request without a rule's custom key from that rule (WAF API
RateBasedStatementCustomKey), so with `per: token` a second rule limits the requests that
carry no Authorization header by address, at the same rate (WAF developer guide,
waf-rate-based-example-limit-missing-header: a scope-down NOT over the header's size): a
client without a token, or probing /health, is limited too. The
rendered Ingress names the ACL (`alb.ingress.kubernetes.io/wafv2-acl-name`), so the load
balancer controller associates it with the ALB it makes; the Ingress waits for the ACL.
Arguments are pulumi-aws 7's `aws.wafv2.WebAcl` (scope, default_action, visibility_config,
rules with rate_based_statement: limit, aggregate_key_type, evaluation_window_sec,
custom_keys)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from llmfleet.fleetplan.entry_point import RateRule


def metric_name(name: str) -> str:
    """WAF metric names: letters, digits, hyphen and underscore, 1-128 characters."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:128]


def rate_statement(rule: RateRule) -> dict[str, Any]:
    statement: dict[str, Any] = {
        "limit": rule.requests,
        "evaluation_window_sec": rule.window_s,
    }
    if rule.per == "token":
        statement["aggregate_key_type"] = "CUSTOM_KEYS"
        statement["custom_keys"] = [
            {"header": {"name": AUTHORIZATION,
                        "text_transformations": [{"priority": 0, "type": "NONE"}]}}
        ]
    else:
        statement["aggregate_key_type"] = "IP"
    return statement


AUTHORIZATION = "authorization"


def without_header(header: str) -> dict[str, Any]:
    """A scope-down statement: requests that carry no `header` (or an empty one); pulumi-aws
    7's scope-down NotStatement takes one `statement`."""
    return {"not_statement": {"statement": {"size_constraint_statement": {
        "field_to_match": {"single_header": {"name": header}},
        "comparison_operator": "GT",
        "size": 0,
        "text_transformations": [{"priority": 0, "type": "NONE"}],
    }}}}


def rate_rule(
    name: str, priority: int, rule: RateRule, statement: dict[str, Any]
) -> dict[str, Any]:
    return {
        "name": name,
        "priority": priority,
        "action": {
            "block": {
                "custom_response": {
                    "response_code": rule.block_status,
                    "custom_response_body_key": "rate-limited",
                }
            }
        },
        "statement": {"rate_based_statement": statement},
        "visibility_config": {
            "cloudwatch_metrics_enabled": True,
            "metric_name": metric_name(name),
            "sampled_requests_enabled": True,
        },
    }


def web_acl_args(rule: RateRule, tags: dict[str, str]) -> dict[str, Any]:
    """Keyword arguments of the region's `aws.wafv2.WebAcl`."""
    rules = [rate_rule(f"{rule.web_acl_name}-rate", 0, rule, rate_statement(rule))]
    if rule.per == "token":  # requests without the header escape the token rule
        anonymous = {
            "limit": rule.requests,
            "evaluation_window_sec": rule.window_s,
            "aggregate_key_type": "IP",
            "scope_down_statement": without_header(AUTHORIZATION),
        }
        rules.append(rate_rule(f"{rule.web_acl_name}-rate-anonymous", 1, rule, anonymous))
    return {
        "name": rule.web_acl_name,
        "scope": "REGIONAL",
        "description": f"{rule.requests} requests per {rule.window_s} s per {rule.per}",
        "default_action": {"allow": {}},
        "custom_response_bodies": [
            {
                "key": "rate-limited",
                "content": '{"error": "rate limited: slow down and retry"}',
                "content_type": "APPLICATION_JSON",
            }
        ],
        "rules": rules,
        "visibility_config": {
            "cloudwatch_metrics_enabled": True,
            "metric_name": metric_name(rule.web_acl_name),
            "sampled_requests_enabled": True,
        },
        "tags": dict(sorted(tags.items())),
    }


class EdgeGuard(pulumi.ComponentResource):
    """Child `{name}` (WebAcl: `web_acl`)."""

    web_acl: aws.wafv2.WebAcl

    def __init__(
        self,
        name: str,
        rule: RateRule,
        aws_provider: aws.Provider,
        tags: dict[str, str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("llmfleet:index:EdgeGuard", name, None, opts)
        self.web_acl = aws.wafv2.WebAcl(
            name,
            **web_acl_args(rule, tags or {}),
            opts=pulumi.ResourceOptions(parent=self, provider=aws_provider),
        )
        self.register_outputs({"web_acl_arn": self.web_acl.arn})
