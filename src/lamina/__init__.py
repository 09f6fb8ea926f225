"""Lamina: a context engine for LLM agents."""
