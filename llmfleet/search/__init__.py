"""The search: sizing one candidate against the SLOs, the lever space, region losses and
the choice per region. Imports catalog, perf and plan; never the FleetPlan."""
