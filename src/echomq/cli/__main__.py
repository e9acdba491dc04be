"""``python -m echomq.cli``: the same command line as the ``echomq`` script."""

from echomq.cli import main

main()
