"""The new VPC's subnets, cut once in the core (`fleetplan.network`)."""

import ipaddress
import re

import pytest

from llmfleet.errors import PlanError
from llmfleet.fleetplan.network import subnet_layout


def test_subnet_layout_follows_the_plans_zone_ids_in_order() -> None:
    layout = subnet_layout("10.40.0.0/16", "us-east-1", ["use1-az6", "use1-az1"])
    private = [s for s in layout if not s.public]
    public = [s for s in layout if s.public]
    assert [s.zone_id for s in private] == ["use1-az6", "use1-az1"]
    assert [s.zone_id for s in public] == ["use1-az6", "use1-az1"]
    assert [s.cidr_block for s in private] == ["10.40.0.0/18", "10.40.64.0/18"]
    assert [s.cidr_block for s in public] == ["10.40.192.0/22", "10.40.196.0/22"]


def test_subnet_layout_of_a_slash_16_in_three_zones() -> None:
    zones = ["usw2-az1", "usw2-az2", "usw2-az4"]
    layout = subnet_layout("10.41.0.0/16", "us-west-2", zones)
    assert [s.cidr_block for s in layout if not s.public] == [
        "10.41.0.0/18",
        "10.41.64.0/18",
        "10.41.128.0/18",
    ]
    assert [s.zone_id for s in layout if s.public] == zones


@pytest.mark.parametrize("cidr", ["10.40.0.0/16", "172.16.0.0/18", "10.0.16.0/20"])
@pytest.mark.parametrize("zones", [["euw1-az3", "euw1-az1"], ["euw1-az1", "euw1-az2", "euw1-az3"]])
def test_subnets_are_disjoint_and_inside_the_vpc(cidr: str, zones: list[str]) -> None:
    layout = subnet_layout(cidr, "eu-west-1", zones)
    vpc = ipaddress.IPv4Network(cidr)
    nets = [ipaddress.IPv4Network(s.cidr_block) for s in layout]
    assert len(layout) == 2 * len(zones)
    assert all(n.subnet_of(vpc) for n in nets)
    assert not any(a.overlaps(b) for k, a in enumerate(nets) for b in nets[k + 1 :])


@pytest.mark.parametrize(
    ("zones", "why"),
    [
        (["use1-az1"], "2 to 3"),
        (["use1-az1", "use1-az2", "use1-az4", "use1-az6"], "2 to 3"),
        (["use1-az1", "use1-az1"], "once"),
        (["use1-az1", "usw2-az1"], "usw2-az1 is not a zone ID of us-east-1"),
        (["use1-az1", "us-east-1a"], "us-east-1a is not a zone ID of us-east-1"),
    ],
)
def test_zones_are_two_or_three_distinct_zone_ids_of_the_region(zones: list[str], why: str) -> None:
    with pytest.raises(PlanError, match=re.escape(why)) as e:
        subnet_layout(
            "10.40.0.0/16", "us-east-1", zones, field="regions[us-east-1].zones"
        )
    assert e.value.field == "regions[us-east-1].zones"
