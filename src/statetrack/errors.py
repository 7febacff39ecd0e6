"""The one exception type for bad user input: the CLI turns it into one line and exit code 2."""
from collections.abc import Iterable


class UserError(ValueError):
    """Input the user can fix: an unknown name, a malformed spec, a missing file, a bad number."""


def allowed(name: str, value: object, choices: Iterable[object]) -> UserError:
    """A UserError naming the bad value and the allowed ones."""
    return UserError(f"unknown {name} {value!r}; allowed: {', '.join(sorted(map(str, choices)))}")
