"""The errors tracedoc reports to users as one line (exit code 2), never as a traceback."""


class TracedocError(Exception):
    """Base class: a problem the user can act on, shown as a one-line message."""


class InputError(TracedocError):
    """The input is missing, unreadable, corrupt, empty or not a format tracedoc knows."""


class RuleError(TracedocError):
    """A rule file is malformed or its SQL does not run against the store."""
