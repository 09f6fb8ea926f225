"""The framework integrations' tests run offline: the Agents SDK exports no traces."""

from agents import set_tracing_disabled

set_tracing_disabled(True)
