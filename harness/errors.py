"""The one exception type a user ever sees: printed as a single line, never a traceback."""


class HarnessError(Exception):
    """A problem with the user's input or environment. The message names the thing and the fix."""


class Unsupported(Exception):
    """A setting this framework cannot run on this platform: the cell is recorded as `skipped`."""
