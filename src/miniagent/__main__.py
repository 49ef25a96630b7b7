"""`python -m miniagent` is the `miniagent` command."""

from miniagent.cli import main

main()
