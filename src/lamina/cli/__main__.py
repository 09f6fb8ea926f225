"""`python -m lamina.cli`: the `lamina` command."""

from lamina.cli import main

main()
