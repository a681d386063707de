"""search.cost: each cost formula once, named for what it is (#31)."""

import pytest

from llmfleet.plan.regions import CapacityPurchase
from llmfleet.search import cost

ON_DEMAND = CapacityPurchase()
SPOT = CapacityPurchase(type="spot", usd_per_hour=20.0)


def _reserved(kind: str, nodes: int, usd_per_hour: float | None = None) -> CapacityPurchase:
    return CapacityPurchase(
        type=kind, reservation_ids=["cr-0123456789abcdef0"], instance_type="p5.48xlarge",
        reserved_nodes=nodes, usd_per_hour=usd_per_hour,
    )


def test_on_demand_monthly_is_nodes_times_price_times_730_hours() -> None:
    # 3 nodes at $98.32/h for 730 h: $215,320.80
    assert cost.on_demand_monthly_usd(3, 98.32) == pytest.approx(215_320.80)
    assert cost.monthly_usd(3 * 98.32) == cost.on_demand_monthly_usd(3, 98.32)
    assert cost.nodes_for_monthly_usd(215_320.80, 98.32) == pytest.approx(3)


def test_on_demand_bills_every_running_node_at_its_price() -> None:
    assert cost.billed_usd_per_hour(ON_DEMAND, 4, 55.04, 55.04, floor_nodes=1) == 4 * 55.04


def test_spot_bills_the_floor_on_demand_and_the_nodes_above_at_the_spot_price() -> None:
    # 5 nodes over a floor of 2: 2 x $55.04 + 3 x $20 = $170.08/h
    assert cost.billed_usd_per_hour(SPOT, 5, 55.04, 20.0, floor_nodes=2) == pytest.approx(170.08)
    # below the floor every node is on demand
    assert cost.billed_usd_per_hour(SPOT, 1, 55.04, 20.0, floor_nodes=2) == pytest.approx(55.04)


def test_a_reservation_is_billed_for_its_nodes_used_or_not() -> None:
    r = _reserved("reservation", 4)
    # 2 running of 4 reserved: all 4 at $55.04; 6 running: 6
    assert cost.billed_usd_per_hour(r, 2, 55.04, 55.04, floor_nodes=4) == pytest.approx(220.16)
    assert cost.billed_usd_per_hour(r, 6, 55.04, 55.04, floor_nodes=4) == pytest.approx(330.24)


def test_a_capacity_block_is_paid_whole_at_its_price_and_on_demand_above_it() -> None:
    b = _reserved("capacity_block", 2, usd_per_hour=31.46)
    # 2 block nodes at $31.46 whether 1 or 2 run; a third at $55.04 on demand
    assert cost.billed_usd_per_hour(b, 1, 55.04, 31.46, floor_nodes=0) == pytest.approx(62.92)
    assert cost.billed_usd_per_hour(b, 3, 55.04, 31.46, floor_nodes=0) == pytest.approx(117.96)


def test_gpu_cost_per_million_output_tokens_is_an_hour_of_nodes_over_an_hours_tokens() -> None:
    # $300/h over 100 req/s x 300 tokens x 3600 s = 108 M tokens: $2.78 per million
    tokens = cost.output_tokens_per_hour(100.0, 300.0)
    assert tokens == 108e6
    assert cost.gpu_usd_per_million_output_tokens(300.0, tokens) == pytest.approx(300 / 108)
    assert cost.gpu_usd_per_million_output_tokens(300.0, 0.0) is None  # a standby


def test_day_profile_cost_per_million_is_the_month_over_the_months_tokens() -> None:
    # $129,287.43 over 28.38 B tokens: $4.56 per million
    usd = cost.day_profile_usd_per_million_output_tokens(129_287.43, 28.38e9)
    assert usd == pytest.approx(4.5556, abs=1e-4)
    assert cost.day_profile_usd_per_million_output_tokens(1.0, 0.0) is None
