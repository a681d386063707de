"""The physics of one replica: architecture -> memory -> step time -> chunked-prefill steady
state, load and overload, speculation, queueing. Plain numbers in; imports catalog only."""
