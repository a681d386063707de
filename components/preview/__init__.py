"""`llmfleet preview`: run the Pulumi program under mocks (run), record what it registers
(mock_monitor), turn that into JSON-able resources (wire) and text (text)."""

from components.preview.run import PreviewResult, run_preview, run_program
from components.preview.text import format_preview

__all__ = ["PreviewResult", "format_preview", "run_preview", "run_program"]
