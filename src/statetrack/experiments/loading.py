"""Finding and reading study files: a built-in study by name (the YAML files beside this module), a
plugin's study (entry point group ``statetrack.studies``) by name, or a file by path (a YAML file of at
most ``untrusted.MAX_YAML_BYTES``, read as data: one error line names the file, the key and what is wrong).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from statetrack import plugins
from statetrack.errors import UserError, did_you_mean
from statetrack.experiments.study_schema import Study
from statetrack.untrusted import MAX_YAML_BYTES, load_yaml, read_text, yaml_problem

HERE = Path(__file__).parent


def builtin_studies() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.yaml"))


def load_study(name_or_path: str) -> Study:
    """A built-in study by name (see ``builtin_studies()``), a plugin's study (entry point group
    ``statetrack.studies``) by name, or a YAML file by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = HERE / f"{name_or_path}.yaml"
        if not path.is_file() and (plugin_path := plugins.study_path(name_or_path)):
            path = Path(plugin_path)
        elif not path.is_file():
            names = builtin_studies() + sorted(plugins.study_entry_points())
            raise UserError(
                f"unknown study {name_or_path!r}{did_you_mean(name_or_path, names)}; allowed: "
                f"{', '.join(names)} "
                "or a path to a .yaml file"
            )
    elif not path.is_file():
        raise UserError(f"study file {str(path)!r} not found")
    what = f"study file {str(path)!r}"
    try:
        data = load_yaml(read_text(path, what, MAX_YAML_BYTES), what)
    except yaml.YAMLError as e:
        raise UserError(f"study file {str(path)!r} is not valid YAML: {yaml_problem(e)}") from None
    if not isinstance(data, dict):
        raise UserError(f"study file {str(path)!r} must hold a mapping, got {type(data).__name__}")
    bad = next((k for k in data if not isinstance(k, str)), "")
    if bad != "":
        raise UserError(f"study file {str(path)!r}: every key must be text, got {bad!r}")
    try:
        return Study(**data)
    except ValidationError as e:
        # an unknown key is the likeliest mistake: name it first
        err = sorted(e.errors(), key=lambda x: x["type"] != "extra_forbidden")[0]
        where = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        raise UserError(f"study file {str(path)!r}: {where + ': ' if where else ''}{msg}") from None
