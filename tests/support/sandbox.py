"""The sandbox the tests that compare Bash's output exactly run Bash in."""

from __future__ import annotations

from lamina.tools import BashTool, SandboxSettings

BASH_SANDBOX: SandboxSettings | None = None if BashTool().sandbox_notice() is None else SandboxSettings(enabled=False)
"""The default sandbox where this machine has one; where it has none (no bubblewrap, no user namespaces),
Bash would say so in its first result, which these tests compare exactly, so they run it unconfined and
quiet there. The sandbox's own tests (tests/tools/test_sandbox.py) skip on such a machine, and the
notice has its own (tests/agent/test_sandbox_notice.py)."""
