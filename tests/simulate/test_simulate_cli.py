"""`llmfleet simulate --json`: the keys it promises, and the same day for the same seed."""

import json

from llmfleet.cli import main

TOP = {"stack", "scenario", "events_text", "seed", "day_profile", "peak_hours", "trough_hours",
       "spike", "loss", "method", "step_s", "slo", "attainment_target", "requests",
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
