"""`llmfleet simulate --json`: the keys it promises, and the same day for the same seed."""

import json

from llmfleet.cli import main
from llmfleet.outputs.simulation import simulation_text
from llmfleet.simulate.result import Simulation, Violation

TOP = {"stack", "scenario", "events_text", "seed", "day_profile", "peak_hours", "trough_hours",
       "spike", "loss", "method", "step_s", "slo", "itl", "attainment_target", "requests",
       "requests_outside_slo", "attainment", "regions", "minutes", "violations", "events",
       "recovery_s", "cost_usd", "plan_cost_usd", "checks"}
REGION = {"region", "requests", "requests_outside_slo", "failed_requests", "attainment",
          "replicas_min", "replicas_max", "nodes_min", "nodes_max", "node_launches",
          "node_hours", "cost_usd", "plan_cost_usd", "minutes"}


def _run(capsys, *argv: str) -> dict:
    assert main(["simulate", "--stack", "dev", "--json", *argv]) == 0
    out: dict = json.loads(capsys.readouterr().out)
    return out


def test_the_json_has_the_documented_keys_and_a_value_per_minute(capsys) -> None:
    got = _run(capsys, "--spike", "50@14:00", "--spike-minutes", "20")
    assert set(got) == TOP
    region = got["regions"][0]
    assert set(region) == REGION
    assert set(region["minutes"]) == {"requests", "attainment", "replicas", "ready", "nodes"}
    assert len(got["minutes"]["attainment"]) == len(region["minutes"]["nodes"]) == 1440
    assert got["events"][0]["kind"] == "spike" and "recovery_s" in got["events"][0]
    assert sum(got["minutes"]["requests"]) == got["requests"]


def test_a_seed_gives_the_same_day_and_another_seed_another(capsys) -> None:
    first, again = _run(capsys, "--seed", "7"), _run(capsys, "--seed", "7")
    assert first == again
    assert _run(capsys, "--seed", "8")["requests"] != first["requests"]


def test_a_missed_itl_is_named_for_the_plans_itl_definition(capsys, own_stacks) -> None:
    """The one-region plan reads ITL as TPOT: a violation of the ITL target is `tpot` in the
    text (JSON keeps the cause `token_gap`, and says `itl: tpot`)."""
    assert main(["simulate", "--stack", "one-region", "--json"]) == 0
    sim = Simulation.model_validate(json.loads(capsys.readouterr().out))
    assert sim.itl == "tpot"
    missed = Violation(region="us-east-1", start="14:00", start_s=50400.0, seconds=60.0,
                       cause="token_gap", requests=100, requests_outside_slo=40)
    text = simulation_text(sim.model_copy(update={"violations": [missed]}))
    assert "│ tpot" in text and "token_gap" not in text
