"""What the mocks answer for the program's invokes and the stage-4 resources: the region's
availability zones, ACM validation records, the Ingress's load balancer, Route53 record
names, the ELB hosted zone and the zone lookup. Deterministic, like the rest of
`FleetMocks`.

`aws.get_availability_zones` answers with the region's zone IDs from the catalog (every zone
offering a catalog GPU instance) and a mock account's names: the k-th ID in zone-ID order
is `<region>` plus the k-th letter, so names and IDs pair up but, as in a real account, a
name says nothing about the physical zone."""

from __future__ import annotations

import string
from typing import Any

from components.preview.mock_monitor import short_hash as _short_hash
from llmfleet import catalog


def routing_outputs(typ: str, name: str, rid: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Computed outputs a stage-4 resource has after creation (empty for the others)."""
    if typ == "aws:acm/certificate:Certificate":
        names = [inputs["domainName"], *inputs.get("subjectAlternativeNames", [])]
        return {
            "domainValidationOptions": [
                {
                    "domainName": d,
                    "resourceRecordName": f"_{_short_hash(d)}.{d}.",
                    "resourceRecordType": "CNAME",
                    "resourceRecordValue": f"_{_short_hash(rid + d)}.mock.acm-validations.aws.",
                }
                for d in names
            ]
        }
    if typ == "aws:route53/record:Record":
        return {"fqdn": str(inputs.get("name", name)).rstrip(".")}
    if typ == "kubernetes:networking.k8s.io/v1:Ingress":
        host = f"k8s-{_short_hash(name)}.{_short_hash(rid)}.mock.elb.amazonaws.com"
        return {"status": {"loadBalancer": {"ingress": [{"hostname": host}]}}}
    return {}


AVAILABILITY_ZONES = "aws:index/getAvailabilityZones:getAvailabilityZones"


def availability_zones(region: str) -> dict[str, Any]:
    ids = catalog.zone_ids(region)
    names = [f"{region}{string.ascii_lowercase[k]}" for k in range(len(ids))]
    return {"id": region, "names": names, "zoneIds": ids, "groupNames": [region] * len(ids)}


def _region_filter(args: dict[str, Any]) -> str:
    for f in args.get("filters", []):
        if f.get("name") == "region-name" and f.get("values"):
            return str(f["values"][0])
    raise NotImplementedError("getAvailabilityZones without a region-name filter")


def routing_call(token: str, args: dict[str, Any]) -> dict[str, Any]:
    """The invokes the program makes: the region's zones, ELB's hosted zone per region, a
    Route53 zone by name."""
    if token == AVAILABILITY_ZONES:
        return availability_zones(_region_filter(args))
    if token == "aws:lb/getHostedZoneId:getHostedZoneId":
        return {"id": f"Z{_short_hash(str(args.get('region', ''))).upper()}MOCK"}
    if token == "aws:route53/getZone:getZone":
        return {"zoneId": f"Z{_short_hash(str(args['name'])).upper()}", **args}
    raise NotImplementedError(f"the program made an unexpected invoke: {token}")
