"""`llmfleet simulate` refuses a day it cannot replay: each error names the flag, the value and
what would work, and the command exits 2."""

import pytest

from llmfleet.cli import main


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--spike", "50@25:00"], "--spike = '50@25:00': '25:00' is not a time of the day"),
        (["--lose", "us-east-1@24:10"], "'24:10' is not a time of the day"),
        (["--spike", "50@23:50"], "must end by 24:00: give at most 10 minutes"),
        (["--lose", "ap-south-1@14:00"], "name a region of the plan: us-east-1, us-west-2"),
        (["--spike=-150@14:00"], "a spike below -100 % would be negative traffic"),
        (["--spike-minutes", "10"], "give it with --spike PCT@HH:MM"),
        (["--day", "20,8"], "P + T <= 24"),
        (["--seed", "-1"], "give a seed of 0 or more"),
    ],
)
def test_a_day_that_cannot_be_replayed_exits_2_naming_the_flag(argv, says, capsys) -> None:
    assert main(["simulate", "--stack", "prod", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("llmfleet: error: --") and says in err
    assert "Traceback" not in err


def test_losing_the_only_region_is_refused(capsys) -> None:
    assert main(["simulate", "--stack", "dev", "--lose", "us-east-1@14:00"]) == 2
    assert "leaves nothing to re-route to" in capsys.readouterr().err


def test_a_spike_of_minus_100_percent_is_a_day_without_traffic_then(capsys) -> None:
    assert main(["simulate", "--stack", "dev", "--spike=-100@14:00", "--json"]) == 0
