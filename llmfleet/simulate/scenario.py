"""What a simulated day is: the day's traffic shape, an optional spike and an optional lost
region, and the seed of its arrivals; with the command line's spellings and their errors.

Times are on the fleet's one clock (HH:MM from midnight). Every region follows the same day
shape at the same time: the plan sizes each region for its share of the peak and a survivor
for its own peak plus a lost region's, i.e. regions peaking together (real regions in other
time zones peak apart, which makes a real day gentler than this one)."""

from __future__ import annotations

import re

from pydantic import Field

from llmfleet.data import Data
from llmfleet.errors import PlanError
from llmfleet.plan.schema import CapacityPlan
from llmfleet.plan.traffic import DayProfile

DAY_S = 86_400
DEFAULT_SPIKE_PERCENT = 50.0
DEFAULT_SPIKE_AT = "14:00"
DEFAULT_SPIKE_MINUTES = 30
"""The report's default spike: half again the traffic for 30 minutes at the peak's middle."""
DEFAULT_LOSS_AT = "14:00"
PEAK_CENTRE_H = 14.0
"""The peak plateau is centred on 14:00 and the trough's on 02:00 (an assumption: the plan
gives hours at the peak and the trough, not when they fall)."""


class DayShape(Data):
    """The day's request rate between the plan's trough and peak."""

    profile: str = Field(description="plan, peak, trough, or the hours given as P,T.")
    peak_hours: float
    trough_hours: float


class Spike(Data):
    percent: float = Field(description="Extra traffic in every region, in % of the day's rate.")
    start_s: int
    minutes: int

    @property
    def end_s(self) -> int:
        return self.start_s + 60 * self.minutes


class Loss(Data):
    region: str
    at_s: int


class Scenario(Data):
    day: DayShape
    spike: Spike | None = None
    loss: Loss | None = None
    seed: int = 0

    def label(self) -> str:
        d = self.day
        text = {"plan": "the plan's day", "peak": "the peak all day",
                "trough": "the trough all day"}.get(
            d.profile, f"a day of {d.peak_hours:g} h at the peak, {d.trough_hours:g} at the trough"
        )
        events = self.events()
        return text + (" with " + " and ".join(events) if events else "")

    def events(self) -> list[str]:
        out = []
        if self.spike:
            out.append(f"a {self.spike.percent:+g} % spike at {clock(self.spike.start_s)} for "
                       f"{self.spike.minutes} min")
        if self.loss:
            out.append(f"{self.loss.region} lost at {clock(self.loss.at_s)}")
        return out


def clock(seconds: float) -> str:
    """HH:MM of a time of day (HH:MM:SS when it has seconds)."""
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h:02d}:{m:02d}" + (f":{sec:02d}" if sec else "")


def parse_clock(text: str, field: str, given: str | None = None) -> int:
    """HH:MM (00:00-23:59) as seconds after midnight; `given`: the whole argument, for the
    error."""
    match = re.fullmatch(r"(\d{1,2}):(\d{2})", text.strip())
    if not match or int(match[1]) > 23 or int(match[2]) > 59:
        raise PlanError(
            field, given or text, f"{text!r} is not a time of the day: give HH:MM, 00:00 to 23:59"
        )
    return int(match[1]) * 3600 + int(match[2]) * 60


def parse_day(text: str, profile: DayProfile) -> DayShape:
    """`plan` (the plan's day_profile), `peak` (the peak all day), `trough`, or `P,T`: hours
    at the peak and at the trough."""
    name = text.strip().lower()
    if name == "plan":
        return DayShape(profile="plan", peak_hours=profile.peak_hours,
                        trough_hours=profile.trough_hours)
    if name in ("peak", "trough"):
        hours = (24.0, 0.0) if name == "peak" else (0.0, 24.0)
        return DayShape(profile=name, peak_hours=hours[0], trough_hours=hours[1])
    match = re.fullmatch(r"(\d+(?:\.\d+)?),(\d+(?:\.\d+)?)", name)
    if match and float(match[1]) + float(match[2]) <= 24:
        return DayShape(profile=name, peak_hours=float(match[1]), trough_hours=float(match[2]))
    raise PlanError(
        "--day",
        text,
        "give plan (the plan's day_profile), peak (the peak all day), trough, or hours at the "
        "peak and at the trough as P,T with P + T <= 24, e.g. 8,8",
    )


def parse_spike(text: str, minutes: int) -> Spike:
    """PCT@HH:MM: PCT % more (or, negative, less) traffic from HH:MM for `minutes`."""
    match = re.fullmatch(r"([+-]?\d+(?:\.\d+)?)%?@(.+)", text.strip())
    if not match:
        raise PlanError("--spike", text, "give PCT@HH:MM, e.g. 50@14:00 (50 % more traffic)")
    percent = float(match[1])
    if percent < -100:
        raise PlanError(
            "--spike", text, "a spike below -100 % would be negative traffic; give -100 or more"
        )
    start = parse_clock(match[2], "--spike", text)
    if minutes < 1:
        raise PlanError("--spike-minutes", minutes, "give a spike of 1 minute or more")
    if start + 60 * minutes > DAY_S:
        raise PlanError(
            "--spike-minutes",
            minutes,
            f"a spike from {clock(start)} must end by 24:00: give at most "
            f"{(DAY_S - start) // 60} minutes",
        )
    return Spike(percent=percent, start_s=start, minutes=minutes)


def parse_loss(text: str, names: list[str]) -> Loss:
    """REGION@HH:MM: one of the plan's regions (`names`) lost at HH:MM, another left serving."""
    region, sep, at = text.strip().partition("@")
    if not sep:
        raise PlanError("--lose", text, f"give REGION@HH:MM, e.g. {names[0]}@14:00")
    if region not in names:
        raise PlanError("--lose", text, f"name a region of the plan: {', '.join(names)}")
    if len(names) < 2:
        raise PlanError(
            "--lose", text, "the plan has one region: losing it leaves nothing to re-route to"
        )
    return Loss(region=region, at_s=parse_clock(at, "--lose", text))


def scenario_from_args(
    plan: CapacityPlan,
    day: str = "plan",
    spike: str | None = None,
    spike_minutes: int = DEFAULT_SPIKE_MINUTES,
    lose: str | None = None,
    seed: int = 0,
) -> Scenario:
    """The scenario the command line gives, checked against the plan before it is sized."""
    return Scenario(
        day=parse_day(day, plan.day_profile),
        spike=parse_spike(spike, spike_minutes) if spike else None,
        loss=parse_loss(lose, [r.name for r in plan.regions]) if lose else None,
        seed=seed,
    )
