"""llmfleet: size a GPU fleet for serving an LLM from first principles.

The package is the pure core: plan schema, catalogs, performance model, sizing,
the FleetPlan, rendering and the CLI. It never imports pulumi.
"""

__version__ = "0.1.0"
