"""The deploying account in names: a plan without `account_id` names its global resources
(S3 buckets) with `fleetplan.weights.ACCOUNT_PLACEHOLDER`, and the program puts in the
account its credentials belong to (`aws.get_caller_identity`), which a real run always knows.
A plan with `account_id` has no placeholder and nothing changes."""

from __future__ import annotations

from typing import Any

import pulumi

from llmfleet.fleetplan.weights import ACCOUNT_PLACEHOLDER


def with_account(value: Any, account: pulumi.Input[str]) -> Any:
    """`value` (a string, or lists and mappings of them) with every placeholder replaced by
    `account`: strings holding it become Outputs, everything else is returned unchanged."""
    if isinstance(value, str):
        if ACCOUNT_PLACEHOLDER not in value:
            return value
        return pulumi.Output.from_input(account).apply(
            lambda a: value.replace(ACCOUNT_PLACEHOLDER, a)
        )
    if isinstance(value, dict):
        return {k: with_account(v, account) for k, v in value.items()}
    if isinstance(value, list):
        return [with_account(v, account) for v in value]
    return value
