"""Placement: turning a turn context into provider requests, and simulating what those requests cost (pure)."""
