"""What the mocks answer for the stage-4 resources and invokes: ACM validation records, the
Ingress's load balancer, Route53 record names, the ELB hosted zone and the zone lookup.
Deterministic, like the rest of `FleetMocks`."""

from __future__ import annotations

from typing import Any

from components.preview.mock_monitor import short_hash as _short_hash


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


def routing_call(token: str, args: dict[str, Any]) -> dict[str, Any]:
    """The invokes the program makes: ELB's hosted zone per region, a zone by name."""
    if token == "aws:lb/getHostedZoneId:getHostedZoneId":
        return {"id": f"Z{_short_hash(str(args.get('region', ''))).upper()}MOCK"}
    if token == "aws:route53/getZone:getZone":
        return {"zoneId": f"Z{_short_hash(str(args['name'])).upper()}", **args}
    raise NotImplementedError(f"the program made an unexpected invoke: {token}")
