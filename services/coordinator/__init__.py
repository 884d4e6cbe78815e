"""The coordinator: runs quality suites and scenarios over memory backends and keeps their results."""
