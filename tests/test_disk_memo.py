"""`disk_memo`: a result computed once is read back for the same inputs, and computed again
when any input, or llmfleet's own files, differ."""

from collections.abc import Callable
from pathlib import Path

import pytest
from plans import make_plan, plan_dict

from llmfleet import disk_memo
from llmfleet.fleetplan.fleet import build_fleet_plan, searched_fleet_plan
from llmfleet.plan.stacks import parse_plan
from llmfleet.simulate.run import report_days, simulate, simulated_day
from llmfleet.simulate.scenario import Scenario, parse_day, scenario_from_args


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LLMFLEET_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LLMFLEET_CACHE", raising=False)
    return tmp_path


def counted() -> tuple[list[int], Callable[[], dict[str, int]]]:
    calls: list[int] = []

    def compute() -> dict[str, int]:
        calls.append(1)
        return {"answer": 42}

    return calls, compute


def test_the_same_parts_compute_once(cache: Path) -> None:
    calls, compute = counted()
    first = disk_memo.memoised("t", ["a", b"b"], compute)
    again = disk_memo.memoised("t", ["a", b"b"], compute)
    assert first == again == {"answer": 42} and len(calls) == 1
    assert len(list((cache / "t").glob("*.pickle"))) == 1


def test_other_parts_compute_again(cache: Path) -> None:
    calls, compute = counted()
    disk_memo.memoised("t", ["a", "b"], compute)
    disk_memo.memoised("t", ["ab"], compute)  # parts are delimited
    assert len(calls) == 2


def test_a_named_file_is_keyed_by_its_bytes(tmp_path: Path) -> None:
    f = tmp_path / "cal.json"
    f.write_text("{}")
    before = disk_memo.key([disk_memo.file_part(f)])
    f.write_text("{ }")
    assert disk_memo.key([disk_memo.file_part(f)]) != before
    f.unlink()
    assert disk_memo.file_part(f).startswith(b"missing:")


def test_off_computes_every_time(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMFLEET_CACHE", "off")
    calls, compute = counted()
    disk_memo.memoised("t", ["a"], compute)
    disk_memo.memoised("t", ["a"], compute)
    assert len(calls) == 2 and not (cache / "t").exists()


def test_an_unreadable_entry_is_computed_again(cache: Path) -> None:
    calls, compute = counted()
    disk_memo.memoised("t", ["a"], compute)
    [entry] = (cache / "t").glob("*.pickle")
    entry.write_bytes(b"not a pickle")
    assert disk_memo.memoised("t", ["a"], compute) == {"answer": 42}
    assert len(calls) == 2


def test_a_fleet_plan_read_back_is_the_one_searched(cache: Path) -> None:
    plan = make_plan()
    searched = searched_fleet_plan(plan)
    stored = build_fleet_plan(plan)  # searched and stored
    read = build_fleet_plan(plan)  # read back
    assert read.model_dump_json() == stored.model_dump_json() == searched.model_dump_json()
    assert len(list((cache / "fleet-plan").glob("*.pickle"))) == 1


def test_the_code_fingerprint_covers_the_package_files() -> None:
    # the catalog, the constants and the templates sit in the package: a change to any
    # changes every key
    assert len(disk_memo.code_fingerprint()) == 64
    files = {p.name for p in disk_memo.PACKAGE_DIR.rglob("*") if p.is_file()}
    assert {"constants.json", "fleet.py", "REPORT.md.j2"} <= files


def test_a_field_set_to_its_default_is_another_plan(cache: Path) -> None:
    # model.precision and kv_cache_dtype given as their defaults pin them (the report prices
    # the pin); left out, the search is free: the same values, two FleetPlans
    free, pinned = plan_dict(), plan_dict()
    free["model"] = {"id": "Llama-3.1-8B-Instruct"}
    pinned["model"] = {"id": "Llama-3.1-8B-Instruct", "precision": "bf16",
                       "kv_cache_dtype": "auto"}
    assert parse_plan(free).model_dump_json() == parse_plan(pinned).model_dump_json()
    assert build_fleet_plan(parse_plan(free)).regions[0].pinned_alternative is None
    assert build_fleet_plan(parse_plan(pinned)).regions[0].pinned_alternative is not None


def test_a_simulated_day_is_read_back_per_scenario(cache: Path) -> None:
    # `simulate` run again reads its day back; another seed is another day, simulated
    plan = make_plan()
    day = parse_day("plan", plan.day_profile)
    first = simulated_day(plan, Scenario(day=day), "t")
    again = simulated_day(plan, Scenario(day=day), "t")
    other = simulated_day(plan, Scenario(day=day, seed=1), "t")
    fresh = simulate(plan, build_fleet_plan(plan), Scenario(day=day), "t")
    assert again.model_dump_json() == first.model_dump_json() == fresh.model_dump_json()
    assert len(list((cache / "simulation").glob("*.pickle"))) == 2
    assert other.model_dump_json() != first.model_dump_json()


def test_simulate_reads_back_the_reports_quiet_day_under_its_own_label(cache: Path) -> None:
    # render's days are `simulate`'s entries: the quiet day is simulate's default scenario, so
    # `simulate` after `render` simulates nothing; the day names the stack it was asked for
    plan = make_plan()
    fleet = build_fleet_plan(plan)
    days = report_days(plan, fleet, fleet.name)
    entries = len(list((cache / "simulation").glob("*.pickle")))
    assert entries == 2  # one region: the quiet day and the spike, no loss
    quiet = simulated_day(plan, scenario_from_args(plan), "t")
    assert len(list((cache / "simulation").glob("*.pickle"))) == entries
    assert quiet.stack == "t" and days.quiet.stack == fleet.name
    fresh = simulate(plan, fleet, scenario_from_args(plan), "t")
    assert quiet.model_dump_json() == fresh.model_dump_json()
