"""Trace analyses as pure functions over the canonical trace events (docs/formats/traces.md)."""
