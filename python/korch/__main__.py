"""``python -m korch ARGS``: the korch command-line tool (as the `korch` console script)."""
from ._cli import main

main()
