"""Facts shipped as data files beside these modules, each row with its source, and the
fitted constants of the performance model. Imports nothing of llmfleet but errors and data."""
