"""Rebuild offerings.csv and zone_id_offerings.csv from local files.

Nothing is downloaded: give the moto wheel (its DescribeInstanceTypeOfferings dumps say where
each instance type is offered) and, to price new rows, the instances.vantage.sh snapshot
committed in tsaol/aws-gpu (`data/all_gpu_instances.js`). See ../README.md for how to get both.

    python -m llmfleet.catalog.tools.regen_offerings --moto-wheel moto-5.2.5-py3-none-any.whl \
        [--vantage-js all_gpu_instances.js] [--check]

Rules, so a rerun changes nothing and a hand-checked price is never lost:
- the offerings are exactly moto's region offerings of the types in instances.csv;
- a priced row already in offerings.csv is kept as it is (a different snapshot price only
  warns); an unpriced row takes the snapshot's price when it has one, else stays unpriced
  with the reason;
- zones come from moto's `availability-zone-id` dump (the IDs name the same physical zone in
  every account); a name is per account (`hardware.zone_names` derives the catalog's).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import re
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llmfleet.catalog.hardware import zone_id_order

CATALOG_DIR = Path(__file__).resolve().parent.parent
DUMPS = "moto/ec2/resources/instance_type_offerings"
KINDS = ("region", "availability-zone", "availability-zone-id")
OFFERING_COLUMNS = (
    "instance_type",
    "region",
    "on_demand_usd_per_hour",
    "price_as_of",
    "source",
    "no_price_reason",
)
VANTAGE_REF = "tsaol/aws-gpu@77fcd9f"

Key = tuple[str, str]  # (instance type, region)


@dataclass
class MotoOfferings:
    version: str
    sha256: str
    # kind -> (instance type, region) -> locations (the region itself, zone names or zone IDs)
    by_kind: dict[str, dict[Key, set[str]]] = field(default_factory=dict)


@dataclass
class VantagePrices:
    date: str
    usd_per_hour: dict[Key, float]
    never_priced: set[str]  # listed with no on-demand price in any region


def read_moto(wheel: Path, instance_types: set[str]) -> MotoOfferings:
    """The offering dumps inside the wheel, limited to the catalog's instance types."""
    data = wheel.read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = sorted(z.namelist())
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        version = re.search(r"^Version: (\S+)$", z.read(meta).decode(), re.M)
        if version is None:
            raise SystemExit(f"{wheel}: no Version in {meta}")
        moto = MotoOfferings(version.group(1), hashlib.sha256(data).hexdigest())
        for kind in KINDS:
            table: dict[Key, set[str]] = {}
            for name in names:
                m = re.fullmatch(rf"{DUMPS}/{kind}/([a-z0-9-]+)\.json\.gz", name)
                if m is None:
                    continue
                for rec in json.loads(gzip.decompress(z.read(name))):
                    if rec["InstanceType"] in instance_types:
                        table.setdefault((rec["InstanceType"], m.group(1)), set()).add(
                            rec["Location"]
                        )
            if not table:
                raise SystemExit(f"{wheel}: no {DUMPS}/{kind}/*.json.gz for the catalog's types")
            moto.by_kind[kind] = table
    check_moto(moto)
    return moto


def check_moto(moto: MotoOfferings) -> None:
    """The three dumps must agree on which (type, region) pairs exist and on zone counts."""
    region, names, ids = (moto.by_kind[k] for k in KINDS)
    if not set(region) == set(names) == set(ids):
        raise SystemExit("moto's region and zone dumps disagree on which offerings exist")
    for (itype, reg), locations in region.items():
        if locations != {reg}:
            raise SystemExit(f"{itype} {reg}: region dump lists {sorted(locations)}")
        if len(names[(itype, reg)]) != len(ids[(itype, reg)]):
            raise SystemExit(f"{itype} {reg}: zone names and zone IDs differ in number")


def read_vantage(js: Path, instance_types: set[str]) -> VantagePrices:
    """On-demand prices from the JS array of tsaol/aws-gpu (instances.vantage.sh data)."""
    text = js.read_text()
    date = re.search(r"Last updated: (\d{4}-\d{2}-\d{2})", text)
    if date is None:
        raise SystemExit(f"{js}: no 'Last updated: YYYY-MM-DD' header")
    prices: dict[Key, float] = {}
    never: set[str] = set()
    for entry in json.loads(text[text.index("[") : text.rindex("]") + 1]):
        itype = entry.get("apiName", entry["name"])
        if itype not in instance_types:
            continue
        found = {
            reg: float(p["onDemand"])
            for reg, p in entry.get("pricing", {}).items()
            if p.get("onDemand") is not None
        }
        if not found:
            never.add(itype)
        prices.update({(itype, reg): usd for reg, usd in found.items()})
    return VantagePrices(date.group(1), prices, never)


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def offering_rows(
    order: Sequence[str],
    moto: MotoOfferings,
    existing: list[dict[str, str]],
    vantage: VantagePrices | None,
) -> list[dict[str, str]]:
    offered = f"offering: moto-{moto.version} DescribeInstanceTypeOfferings [MOTO-OFF]"
    old = {(r["instance_type"], r["region"]): r for r in existing}
    keys = set(moto.by_kind["region"])
    for key, row in old.items():
        if key not in keys and row["on_demand_usd_per_hour"]:
            warn(f"{key}: priced row that moto does not offer; kept, check it by hand")
            keys.add(key)
    rows = []
    for itype, reg in sorted(keys, key=lambda k: (order.index(k[0]), k[1])):
        row = dict.fromkeys(OFFERING_COLUMNS, "") | old.get((itype, reg), {})
        row |= {"instance_type": itype, "region": reg}
        snapshot = vantage.usd_per_hour.get((itype, reg)) if vantage else None
        if row["on_demand_usd_per_hour"]:
            if snapshot is not None and float(row["on_demand_usd_per_hour"]) != snapshot:
                warn(f"{itype} {reg}: kept {row['on_demand_usd_per_hour']}, snapshot {snapshot}")
            row["no_price_reason"] = ""
        elif snapshot is not None and vantage is not None:
            row |= {
                "on_demand_usd_per_hour": repr(snapshot),
                "price_as_of": vantage.date,
                "source": f"{offered}; price: instances.vantage.sh via {VANTAGE_REF} "
                f"({vantage.date}) [VANTAGE]",
                "no_price_reason": "",
            }
        else:
            row |= {
                "on_demand_usd_per_hour": "",
                "price_as_of": "",
                "source": offered,
                "no_price_reason": no_price_reason(itype, vantage, row["no_price_reason"]),
            }
        rows.append({c: row[c] for c in OFFERING_COLUMNS})
    return rows


def no_price_reason(itype: str, vantage: VantagePrices | None, old: str) -> str:
    if vantage is None:
        return old or "no price source was given when this row was built"
    if itype in vantage.never_priced:
        return (
            f"no on-demand price in any region of [VANTAGE] ({vantage.date}): sold through "
            "EC2 Capacity Blocks for ML only"
        )
    return (
        f"[VANTAGE] ({vantage.date}) has no price for it in this region and no other "
        "public price was found; add a plan.prices override"
    )


def zone_rows(order: Sequence[str], moto: MotoOfferings) -> list[dict[str, str]]:
    kind, column = "availability-zone-id", "zone_id"
    source = f"[MOTO-OFF] moto-{moto.version} DescribeInstanceTypeOfferings --location-type {kind}"
    table = moto.by_kind[kind]
    rows = []
    for itype, reg in sorted(table, key=lambda k: (order.index(k[0]), k[1])):
        for zone in sorted(table[(itype, reg)], key=zone_id_order):
            rows.append({"instance_type": itype, "region": reg, column: zone, "source": source})
    return rows


def csv_text(columns: Sequence[str], rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def build(catalog_dir: Path, wheel: Path, vantage_js: Path | None) -> dict[str, str]:
    """File name -> new text, for the two files this tool owns."""
    order = [r["instance_type"] for r in read_rows(catalog_dir / "instances.csv")]
    moto = read_moto(wheel, set(order))
    print(f"moto {moto.version}, sha256 {moto.sha256}", file=sys.stderr)
    vantage = read_vantage(vantage_js, set(order)) if vantage_js else None
    offerings = offering_rows(order, moto, read_rows(catalog_dir / "offerings.csv"), vantage)
    by_id = zone_rows(order, moto)
    return {
        "offerings.csv": csv_text(OFFERING_COLUMNS, offerings),
        "zone_id_offerings.csv": csv_text(("instance_type", "region", "zone_id", "source"), by_id),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--moto-wheel", type=Path, required=True, help="a local moto .whl")
    parser.add_argument("--vantage-js", type=Path, help="tsaol/aws-gpu data/all_gpu_instances.js")
    parser.add_argument("--catalog-dir", type=Path, default=CATALOG_DIR)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file would change")
    args = parser.parse_args(argv)
    changed = []
    for name, text in build(args.catalog_dir, args.moto_wheel, args.vantage_js).items():
        path = args.catalog_dir / name
        if path.exists() and path.read_text() == text:
            continue
        changed.append(name)
        if not args.check:
            path.write_text(text)
    print(f"{'would change' if args.check else 'rewrote'}: {changed or 'nothing'}", file=sys.stderr)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
