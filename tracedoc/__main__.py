from tracedoc.cli import cli

cli()
