"""The fleet through time: a day of arrivals replayed through the replicas, the control
loops and the routing the FleetPlan deploys (`llmfleet simulate`).

It sits above `fleetplan` (it reads a FleetPlan, and the CapacityPlan for the length
distributions) and below `outputs` (the report's chart and section read its result):
`scenario` (the day, a spike, a lost region), `traffic` (the diurnal curve, Poisson arrivals,
DNS re-routing), `engine` (a replica pool as a fluid on the plan's step-time model),
`control` (KEDA/HPA, Karpenter and the cold start), `day` (the loop), `result` (what it
reports, the checks against the plan) and `events` (a per-request run for a short window,
the yardstick of the fluid model's error). Imports fleetplan and the packages below it."""
