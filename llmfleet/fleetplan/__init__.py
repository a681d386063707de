"""The FleetPlan: every decided number, each section's data class beside its builder, and
`fleet.build_fleet_plan`. Imports catalog, perf, plan and search; never outputs."""
