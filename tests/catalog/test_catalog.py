"""The catalog's offerings, prices and zones: every row sourced, priced or saying why not."""

import gzip
import io
import json
import re
import statistics
import zipfile
from pathlib import Path

import pytest
from plans import make_plan

from llmfleet.catalog import hardware
from llmfleet.catalog.hardware import Offering
from llmfleet.catalog.tools import regen_offerings
from llmfleet.errors import UnknownNameError
from llmfleet.fleetplan.fleet import build_fleet_plan

P_FAMILIES = ("p6-b200", "p5en", "p5e", "p5", "p4de", "p4d")
G_FAMILIES = ("g6e", "g6", "g5")


def family(instance_type: str) -> str:
    return instance_type.split(".")[0]


@pytest.mark.parametrize("region", ["eu-central-1", "us-east-2"])
def test_a_plan_sizes_in_regions_beyond_the_first_three(region):
    plan = make_plan(regions=[{"name": region, "traffic_share": 1.0}])
    r = build_fleet_plan(plan).regions[0]
    assert r.price_usd_per_hour == hardware.on_demand_price(r.instance_type, region)
    assert r.price_source == "on-demand list price 2026-01-21 [catalog]"


def test_frankfurt_prices_are_the_regions_own_not_virginias():
    # [VANTAGE] 2026-01-21: g6e.xlarge is $1.861/h in us-east-1 and $2.327/h in eu-central-1
    assert hardware.on_demand_price("g6e.xlarge", "us-east-1") == 1.861
    assert hardware.on_demand_price("g6e.xlarge", "eu-central-1") == 2.327


def test_every_priced_row_has_a_source_and_a_date():
    priced = [o for o in hardware.offerings() if o.on_demand_usd_per_hour is not None]
    assert len(priced) == 399
    for o in priced:
        assert "[VANTAGE]" in o.source and "[MOTO-OFF]" in o.source, o
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", o.price_as_of or ""), o


def test_an_unpriced_offering_says_why():
    unpriced = [o for o in hardware.offerings() if o.on_demand_usd_per_hour is None]
    assert len(unpriced) == 60
    assert all(o.no_price_reason and o.price_as_of is None for o in unpriced)
    p5e = hardware.offering("p5e.48xlarge", "us-west-2")
    assert p5e is not None and "Capacity Blocks" in (p5e.no_price_reason or "")


def test_no_price_is_not_the_same_as_not_offered():
    # ap-northeast-3 offers g6e.xlarge (moto) but no snapshot prices it; it offers no p5
    assert hardware.is_offered("g6e.xlarge", "ap-northeast-3")
    assert hardware.on_demand_price("g6e.xlarge", "ap-northeast-3") is None
    assert not hardware.is_offered("p5.48xlarge", "ap-northeast-3")
    assert hardware.offering("p5.48xlarge", "ap-northeast-3") is None


def test_an_offering_row_cannot_have_a_price_without_a_date():
    with pytest.raises(ValueError, match="price_as_of"):
        Offering(
            instance_type="g5.xlarge",
            region="us-east-1",
            on_demand_usd_per_hour=1.006,
            price_as_of=None,
            source="x",
        )


def test_no_region_and_instance_pair_appears_twice():
    keys = [(o.instance_type, o.region) for o in hardware.offerings()]
    assert len(keys) == len(set(keys)) == 459


def test_p_family_prices_are_after_the_june_2025_cut():
    # Before the cut p5 cost 1.79x, p4d 1.49x and p5en 1.34x today's us-east-1 price. A region's
    # P premium over us-east-1 stays within 0.2 of its G premium (which was not cut), so a
    # pre-cut price would stand out by 0.34 or more.
    def premium(itype: str, region: str) -> float | None:
        here = hardware.on_demand_price(itype, region)
        base = hardware.on_demand_price(itype, "us-east-1")
        return here / base if here and base else None

    checked = 0
    for o in hardware.offerings():
        p = premium(o.instance_type, o.region)
        if family(o.instance_type) not in P_FAMILIES or p is None:
            continue
        g = [
            premium(g.instance_type, o.region)
            for g in hardware.offerings()
            if family(g.instance_type) in G_FAMILIES and g.region == o.region
        ]
        g_premiums = [x for x in g if x is not None]
        if g_premiums:
            assert p <= statistics.median(g_premiums) + 0.2, (o, p)
            checked += 1
    assert checked >= 50


def test_gpu_zones_are_named_by_id():
    # moto's availability-zone-id dump: p5.48xlarge is offered in all six us-east-1 zones
    assert hardware.zone_ids("us-east-1", "p5.48xlarge") == [f"use1-az{n}" for n in range(1, 7)]
    # p4d.24xlarge is in one eu-west-1 zone: euw1-az2 (moto's account calls it eu-west-1c)
    assert hardware.zone_ids("eu-west-1", "p4d.24xlarge") == ["euw1-az2"]


def test_zone_ids_sort_by_number():
    assert sorted(["use1-az10", "use1-az2"], key=hardware.zone_id_order) == [
        "use1-az2",
        "use1-az10",
    ]


def test_every_offering_has_zone_ids():
    for o in hardware.offerings():
        assert hardware.zone_ids(o.region, o.instance_type), o


def test_zone_names_are_the_catalog_accounts_letters_in_zone_id_order():
    # us-east-1's GPU zones in ID order: use1-az1 .. use1-az6 -> us-east-1a .. us-east-1f
    ids = hardware.zone_ids("us-east-1")
    assert hardware.zone_names("us-east-1", ids) == [
        f"us-east-1{letter}" for letter in "abcdefghij"[: len(ids)]
    ]
    assert hardware.zone_names("us-east-1", [ids[2], ids[0]]) == ["us-east-1c", "us-east-1a"]


def test_an_unknown_zone_id_names_the_known_ones():
    assert hardware.check_zone_id("eu-west-1", "euw1-az2") == "euw1-az2"
    with pytest.raises(UnknownNameError, match="unknown zone ID of eu-west-1.*euw1-az1"):
        hardware.check_zone_id("eu-west-1", "use1-az4", "regions[0].zones[0]")


def fake_wheel(path: Path) -> Path:
    """A moto-shaped wheel: g5.xlarge in us-east-1 (two zones) and eu-west-3 (one)."""
    dumps = regen_offerings.DUMPS
    files = {
        "region": {"us-east-1": ["us-east-1"], "eu-west-3": ["eu-west-3"]},
        "availability-zone": {
            "us-east-1": ["us-east-1a", "us-east-1b"],
            "eu-west-3": ["eu-west-3a"],
        },
        "availability-zone-id": {"us-east-1": ["use1-az4", "use1-az1"], "eu-west-3": ["euw3-az1"]},
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("moto-9.9.9.dist-info/METADATA", "Name: moto\nVersion: 9.9.9\n")
        for kind, regions in files.items():
            for region, locations in regions.items():
                records = [{"InstanceType": "g5.xlarge", "Location": loc} for loc in locations]
                z.writestr(
                    f"{dumps}/{kind}/{region}.json.gz", gzip.compress(json.dumps(records).encode())
                )
    path.write_bytes(buf.getvalue())
    return path


def test_regeneration_keeps_a_checked_price_and_prices_new_rows_from_the_snapshot(tmp_path):
    (tmp_path / "instances.csv").write_text("instance_type\ng5.xlarge\n")
    (tmp_path / "offerings.csv").write_text(
        "instance_type,region,on_demand_usd_per_hour,price_as_of,source\n"
        "g5.xlarge,us-east-1,1.006,2026-01-21,checked by hand\n"
    )
    snapshot = tmp_path / "all.js"
    snapshot.write_text(
        '// Last updated: 2026-01-21\nconst a = [{"name": "g5.xlarge", "pricing": '
        '{"us-east-1": {"onDemand": 9.0}, "eu-west-3": {"onDemand": 1.2}}}];\n'
    )
    wheel = fake_wheel(tmp_path / "moto.whl")
    args = [
        "--moto-wheel",
        str(wheel),
        "--vantage-js",
        str(snapshot),
        "--catalog-dir",
        str(tmp_path),
    ]
    assert regen_offerings.main(args) == 0
    rows = (tmp_path / "offerings.csv").read_text().splitlines()
    assert rows[1].startswith("g5.xlarge,eu-west-3,1.2,2026-01-21,offering: moto-9.9.9")
    assert rows[2] == "g5.xlarge,us-east-1,1.006,2026-01-21,checked by hand,"
    zone_ids = (tmp_path / "zone_id_offerings.csv").read_text().splitlines()
    assert [r.split(",")[2] for r in zone_ids[1:]] == ["euw3-az1", "use1-az1", "use1-az4"]
    assert regen_offerings.main([*args, "--check"]) == 0  # a rerun changes nothing


def test_the_shipped_offerings_file_is_in_the_tools_own_format():
    # Without the wheel this checks only the tool's format: parse and rewrite are lossless
    rows = regen_offerings.read_rows(hardware.DATA_DIR / "offerings.csv")
    text = regen_offerings.csv_text(regen_offerings.OFFERING_COLUMNS, rows)
    assert text == (hardware.DATA_DIR / "offerings.csv").read_text()
