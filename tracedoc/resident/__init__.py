"""A resident process: `tracedoc resident start` keeps one Python process with tracedoc imported and ready, and
`tracedoc analyze` and `tracedoc diff` hand their work to it instead of starting Python and importing tracedoc,
DuckDB, click and Rich again (about a fifth of a small trace's run).

The process forks once per command: the child takes the caller's standard input, output and error (passed over a
Unix socket), working directory, environment, umask and CPUs, runs the same command line as a process of its own
would, and hands back the exit code. Where no resident process serves this installation, or it refuses (its code
changed on disk since it started), the command runs in its own process as always: nothing but speed depends on it.

- ``where``: where this installation's socket is, asked on every run (a stat where none runs);
- ``wire``: the messages on it, the caller's standard streams passed with the first (standard library only);
- ``client``: the command line's side;
- ``server``: the resident process.
"""
