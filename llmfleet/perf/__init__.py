"""The physics of one replica: architecture -> memory -> step time -> chunked-prefill steady
state, load and overload, speculation, queueing. Plain numbers in; imports catalog only."""

from __future__ import annotations




