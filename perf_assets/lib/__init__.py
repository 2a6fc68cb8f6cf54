"""Plain code shared by the Dagster definitions, the CLI and the tests (never autoloaded)."""
