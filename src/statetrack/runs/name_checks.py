"""The names a run's config gives, checked before torch loads: every mixer of its layer spec with its
options, and its task (the family, and the argument where building the task is cheap). A typo
(``--layers mamab``, ``--task partiy``, ``mamba(con=0)``, ``group:S7x``) is then said in well under a
second, not after the seconds torch takes to import; the run's full checks (``runner.check_run``: the
model built on the meta device, the devices, memory) follow. Nothing here imports torch: the tasks'
registry and the mixers' declarations need none."""

from __future__ import annotations

from statetrack import plugins
from statetrack.config import TrainConfig
from statetrack.errors import allowed
from statetrack.layers.properties import check_options, declaration
from statetrack.spec import parse_layers
from statetrack.tasks import FAMILIES, get_task

#: task families whose task loads a corpus (and, with the LM metrics, torch): only the family is checked
CORPUS_FAMILIES = ("lm",)


def check_names(flat: dict) -> None:
    """A UserError naming the first unknown mixer, mixer option or task of a run's flat config (dotted
    keys, as ``config.run_configs`` takes it; its task defaults to TrainConfig's), with the allowed names
    and a 'did you mean'; nothing when they are all known. A value of the wrong type is left to the
    config's validation, which names its key and the type expected."""
    layers = flat.get("model.layers")
    if isinstance(layers, str):
        for spec in parse_layers(layers):
            check_options(declaration(spec.name), spec.options)
    task = flat.get("task", TrainConfig.model_fields["task"].default)
    if not isinstance(task, str):
        return
    family = task.strip().partition(":")[0]
    if family not in FAMILIES:
        plugins.autoload()
    if family not in FAMILIES:
        raise allowed("task family", family, FAMILIES)
    if family not in CORPUS_FAMILIES:
        get_task(task)
