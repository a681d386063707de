"""What a reviewer and the deploy read: rendered files (vLLM config, manifests, Karpenter
pools, dashboard, charts, the report), text views, and diffs of two FleetPlans. Reads the
FleetPlan; decides nothing. Imports every package below it."""
