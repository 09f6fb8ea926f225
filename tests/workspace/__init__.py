"""Tests for lamina.workspace."""
