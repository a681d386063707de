"""`llmfleet diff`: what a change to a plan does. `compare` (the PlanDiff of two FleetPlans
and of the files they render), `causes` (one line per material change, naming the constraint
that binds), `markdown` (the pull-request comment) and `before_after_charts` (the SVGs of
`--charts`). Imports the outputs beside it (render, economics, charts) and what they import."""
