"""`llmfleet preview`: run the Pulumi program under mocks (run), answer its resources and
invokes (mocks), record what it registers (monitor), turn that into JSON-able resources
(wire) and text (text)."""
