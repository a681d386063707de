"""The report's simulated days: the day chart and the section, and its cost read as the plan
prices nodes."""

import pytest

from llmfleet.outputs import render
from llmfleet.outputs.day_chart import DAY_CHART
from llmfleet.plan.stacks import list_stacks, read_plan
from llmfleet.search.cost import monthly_usd
from llmfleet.simulate.result import usd_per_hour
from llmfleet.simulate.run import report_simulation


@pytest.mark.parametrize("env", list_stacks())
def test_the_report_shows_the_simulated_days_and_their_chart(env, stack_plans) -> None:
    fp = stack_plans[env]
    files = render.render_stack(fp, None, report_simulation(read_plan(env), fp, fp.name))
    report = files[render.REPORT]
    assert "## Through the day (simulated)" in report
    assert f"]({DAY_CHART.path})" in report and DAY_CHART.path in files
    assert "Where the simulated days contradict the plan's steady-state figures:" in report


def test_without_the_simulation_the_report_has_no_simulated_days(stack_plans) -> None:
    files = render.render_stack(stack_plans["dev"])
    assert DAY_CHART.path not in files
    assert "Through the day" not in files[render.REPORT]


@pytest.mark.parametrize("env", list_stacks())
def test_a_simulated_node_costs_what_the_plan_charges_for_it(env, stack_plans) -> None:
    plan = read_plan(env)
    for rp in stack_plans[env].regions:
        at_peak = monthly_usd(usd_per_hour(plan, rp, rp.nodes.desired))
        assert at_peak == pytest.approx(rp.costs.gpu_peak, abs=0.01)
        at_trough = monthly_usd(usd_per_hour(plan, rp, rp.nodes.min))
        assert at_trough == pytest.approx(rp.costs.gpu_trough, abs=0.01)
