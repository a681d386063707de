from llmfleet.cli import main

raise SystemExit(main(ends_process=True))
