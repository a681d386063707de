"""Pulumi components: translate a FleetPlan into AWS and Kubernetes resources. No math.
Imports llmfleet; nothing in llmfleet imports it."""
