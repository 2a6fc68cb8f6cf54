"""Parsers, one module per input format. Each returns rows in its raw table's schema plus event_date."""
