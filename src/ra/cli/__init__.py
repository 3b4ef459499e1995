"""The ``ra`` command (see docs/cli.md).

Nothing is imported here: ``ra.cli.__main__:main`` is the entry point, and rich, platformdirs and
the agent layers load only when the command runs, so ``import ra`` never pays for the CLI.
"""
