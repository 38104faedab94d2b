"""Summaries, tables and plots of results (matplotlib is imported lazily, only for plots)."""
