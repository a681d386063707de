"""Scripts that rebuild catalog files from local copies of their sources; never run by llmfleet."""
