"""A resource's URN is its identity in Pulumi's state: a change to the program that moves one
(a new name, a new parent, a new parent type) makes `pulumi up` delete the resource and create
it anew, a cluster or a bucket included. So the program's URNs are pinned: for every shipped
environment stack and for the fleets this file owns (a user's multi-region stack, a replica
across two nodes, reserved capacity), the URNs the program registers under mocks are the ones
recorded in `urns/<fleet>.txt`.

A snapshot is recorded with its input's SHA-256 (the stack file, or the plan below): a shipped
stack a user edited, removed or added is skipped, never failed. When a change moves URNs on
purpose, regenerate the snapshots and let the reviewer read their diff:

    venv/bin/python tests/components/test_urns.py

Region and global stacks (`ENV.REGION`, `ENV.global`) hold the environment's URNs but for the
stack's name: `test_region_stacks.py` checks that, URN by URN.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

if __name__ == "__main__":  # run as a script: the paths pytest's configuration gives
    ROOT = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from plans import (  # noqa: E402
    EDGE,
    ONE_REGION,
    PRODUCTION,
    RESERVED_FRONTIER,
    THREE_REGIONS,
    plan_dict,
)

from components.preview.run import run_program  # noqa: E402
from llmfleet.plan.stacks import list_stacks, stack_path  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

SNAPSHOTS = Path(__file__).with_name("urns")

USER_MULTI_REGION: dict[str, Any] = {
    **THREE_REGIONS,
    "name": "chat-user",
    "regions": [
        {"name": "us-east-1", "traffic_share": 0.45, "vpc_cidr": "10.40.0.0/16"},
        # an existing VPC: no Network component in this region
        {"name": "us-west-2", "traffic_share": 0.35, "network": {
            "vpc_id": "vpc-0123456789abcdef0",
            "private_subnet_ids": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
            "load_balancer_cidrs": ["10.50.0.0/24", "10.50.1.0/24"]}},
        # leaving the fleet: it keeps its resources but not its place in the global name
        {"name": "eu-north-1", "traffic_share": 0.20, "vpc_cidr": "10.42.0.0/16",
         "retire": True},
    ],
    "routing": {"survive_region_losses": 1},
}
"""A user's own stack in three regions: a new VPC, an existing VPC, a retiring region."""

PREFIX_AWARE: dict[str, Any] = {
    **ONE_REGION,
    "traffic": {**ONE_REGION["traffic"], "shared_prefix_tokens": 400, "turns": 4,
                "think_time_s": 30},
    "edge": {"balancing": "prefix_aware"},
}
"""One region whose API goes through the cache-aware router."""

OWN_FLEETS: dict[str, dict[str, Any]] = {
    "own-user-multi-region": USER_MULTI_REGION,
    "own-minimal": plan_dict(),
    "own-two-node-reserved": plan_dict(**RESERVED_FRONTIER),
    "own-production-edge": plan_dict(**PRODUCTION, **EDGE),
    "own-prefix-aware": PREFIX_AWARE,
}
"""Fleets whose plans this file holds: no account_id (the caller's), the multi-node support
and a reservation's placement group, one region behind a global name, the prefix router."""


def _config(plan: dict[str, Any]) -> dict[str, Any]:
    return {"aws:region": plan["regions"][0]["name"], "llmfleet:plan": plan}


def _fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _inputs() -> dict[str, tuple[str, dict[str, Any] | None]]:
    """fleet -> (its input's SHA-256, the config to run it with; None: the stack's file)."""
    shipped = {env: (_fingerprint(stack_path(env).read_text()), None) for env in list_stacks()}
    own = {name: (_fingerprint(json.dumps(plan, sort_keys=True)), _config(plan))
           for name, plan in OWN_FLEETS.items()}
    return {**shipped, **own}


def urns(stack: str, config: dict[str, Any] | None) -> list[str]:
    """The program's URNs, sorted, less the part every URN of the stack shares
    (`urn:pulumi:<stack>::<project>::`)."""
    return sorted(r["urn"].split("::", 2)[2] for r in run_program(stack, config).resources)


def _read(fleet: str) -> tuple[str | None, list[str]]:
    path = SNAPSHOTS / f"{fleet}.txt"
    if not path.is_file():
        return None, []
    lines = path.read_text().splitlines()
    fingerprint = next((line.split()[-1] for line in lines if line.startswith("# input")), None)
    return fingerprint, [line for line in lines if line and not line.startswith("#")]


def _write(fleet: str, fingerprint: str, found: list[str]) -> None:
    header = [
        f"# The URNs of {fleet}'s program under mocks, less `urn:pulumi:<stack>::<project>::`.",
        "# Made by `venv/bin/python tests/components/test_urns.py` (tests/components/test_urns.py",
        "# says when to remake it).",
        f"# input sha256 {fingerprint}",
    ]
    (SNAPSHOTS / f"{fleet}.txt").write_text("\n".join([*header, *found]) + "\n")


INPUTS = _inputs()


@pytest.mark.parametrize("fleet", list(INPUTS))
def test_the_program_registers_the_urns_of_its_snapshot(fleet: str) -> None:
    fingerprint, config = INPUTS[fleet]
    recorded, expected = _read(fleet)
    if fleet not in OWN_FLEETS and recorded != fingerprint:
        pytest.skip(f"stacks/Pulumi.{fleet}.yaml is not the stack its snapshot was made from")
    assert recorded == fingerprint, f"{fleet}'s plan changed: remake urns/{fleet}.txt"
    found = urns(fleet, config)
    moved = {
        "gone": sorted(set(expected) - set(found)),
        "new": sorted(set(found) - set(expected)),
    }
    assert moved == {"gone": [], "new": []}, (
        "URNs moved: `pulumi up` would replace the gone ones (remake the snapshot only if "
        "that is meant)")
    assert len(found) == len(set(found))


if __name__ == "__main__":
    SNAPSHOTS.mkdir(exist_ok=True)
    for name, (digest, cfg) in INPUTS.items():
        _write(name, digest, urns(name, cfg))
        print(f"wrote {SNAPSHOTS / name}.txt")
