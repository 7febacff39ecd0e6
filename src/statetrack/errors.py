"""The one exception type for bad user input: the CLI turns it into one line and exit code 2."""


class UserError(ValueError):
    """Input the user can fix: an unknown name, a malformed spec, a missing file, a bad number."""


def allowed(name: str, value, choices) -> UserError:
    """A UserError naming the bad value and the allowed ones."""
    return UserError(f"unknown {name} {value!r}; allowed: {', '.join(sorted(map(str, choices)))}")
