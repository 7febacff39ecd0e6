"""Modules of your own as mixers: any causal ``nn.Module``, an fla layer, a Hugging Face model.

``register_module(name, factory, ...)`` registers a mixer named ``name`` built as ``CausalModule(factory(
d_model, d_state, **options))``: a layer spec may then name it (``mylayer``, ``mylayer(width=4)*2``) and
every command uses it, as a built-in mixer. The options are the factory's keyword arguments after
``d_model`` and ``d_state``, with their defaults. A module that declares its transition (``transition(x)``
or ``eigenvalues(x)``, ``base.TRANSITION_PROTOCOL``) has its eigenvalues read by ``spectrum``. The
properties the oracle reads are the ones given (by default ``UNKNOWN``: no theorem of docs/science.md
speaks of such a module, so its verdicts are open).

``CausalModule`` carries, as its state, the inputs seen so far: evaluating a chunk runs the module over
the prefix and the chunk and keeps the chunk's outputs, so any causal module (its output at t reads
inputs up to t) is evaluated at any length with the numbers of one pass over the whole sequence. The
cost grows with the length (time as the square of the number of chunks, memory as the prefix): to test at
the 10,000-length scale in fixed memory, give the module a state of its own (a ``Mixer`` subclass,
docs/extending.md).

``hf_embeds(model)`` runs a Hugging Face model on input embeddings (``inputs_embeds``) and returns its
last hidden state: a mixer's body. ``hf_tokens(model)`` runs it on token ids: a whole model's body
(``statetrack.model.WholeModel``). ``fla_layer(layer)`` returns the output of an fla layer (whose forward
returns a tuple). None of them imports transformers or fla: the caller builds the model from its config.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, cast

import torch
from torch import Tensor, nn

from statetrack.layers.base import Device, Mixer, transition_eigenvalues
from statetrack.layers.properties import Declared, EigenvalueDomain, Properties, Structure, declare

#: what the oracle reads of a module that declares nothing: no transition matrix and no known structure,
#: about which no theorem of docs/science.md speaks (its verdicts are 'open')
UNKNOWN = Properties(
    input_dependent=True, eigenvalues=EigenvalueDomain.NOT_LINEAR, structure=Structure.DENSE, linear=False
)


class CausalModule(Mixer):
    """A mixer around a causal module ``body`` (B, T, d_model) -> (B, T, d_model); state: the inputs so far
    (B, T_seen, d_model)."""

    name = "module"
    properties_given: Properties = UNKNOWN

    def __init__(self, d_model: int, d_state: int, body: nn.Module | None = None):
        """Args: d_model (int): the width of the stream; d_state (int): passed to the factory; body
        (nn.Module): maps x (Tensor): [B, T, d_model] to [B, T, d_model], causally."""
        super().__init__(d_model, d_state)
        if body is None:
            raise TypeError("CausalModule needs a body: the module it runs")
        self.body = body

    @property
    def properties(self) -> Properties:
        return self.properties_given

    def init_state(self, batch: int, device: Device = None, dtype: torch.dtype | None = None) -> Tensor:
        """No input seen: [batch, 0, d_model]."""
        return torch.zeros(batch, 0, self.d_model, device=device, dtype=dtype)

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Args: x (Tensor): [B, T, d_model]; state (Tensor): the inputs so far [B, T_seen, d_model], None:
        none. Returns: the body's outputs at x's positions [B, T, d_model], and the inputs so far with x."""
        full = x if state is None or state.shape[1] == 0 else torch.cat([state, x], dim=1)
        y = self.body(full)
        return y[:, full.shape[1] - x.shape[1] :], full

    def step(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        """Args: x (Tensor): [B, d_model], one token; state (Tensor): the inputs so far. Returns: the body's
        output at x [B, d_model], and the inputs so far with x."""
        y, state = self.forward(x[:, None], state)
        return y[:, 0], state

    def eigenvalues(self, x: Tensor) -> Tensor | None:
        """The body's eigenvalues of A(x) [B, T, n], where it declares its transition (``transition(x)`` or
        ``eigenvalues(x)``, :data:`statetrack.layers.base.TRANSITION_PROTOCOL`); None where it does not."""
        return transition_eigenvalues(self.body, x)


def _factory_options(factory: Callable[..., nn.Module]) -> dict[str, Any]:
    """The factory's keyword arguments after (d_model, d_state), with their defaults."""
    params = list(inspect.signature(factory).parameters.values())[2:]  # after d_model, d_state
    return {p.name: p.default for p in params if p.default is not p.empty}


def register_module(
    name: str, factory: Callable[..., nn.Module], properties: Properties = UNKNOWN, description: str = ""
) -> type[Mixer]:
    """Register the mixer ``name``: ``factory(d_model, d_state, **options)`` returns a causal module
    (B, T, d_model) -> (B, T, d_model); ``properties``: what the oracle reads of it. Returns the class.
    A factory defined in a module of yours (not a notebook's ``__main__``) lets the runs record it, so that
    ``eval`` and ``rerun`` find it again (docs/extending.md)."""
    from statetrack.layers import register  # the registry imports this package's modules

    options = _factory_options(factory)

    def __init__(self: CausalModule, d_model: int, d_state: int, **kw: Any) -> None:
        CausalModule.__init__(self, d_model, d_state, factory(d_model, d_state, **kw))

    # the options of the class are the factory's: its __init__ gets that signature
    params = [
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("d_model", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("d_state", inspect.Parameter.POSITIONAL_OR_KEYWORD),
    ]
    params += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v) for k, v in options.items()]
    __init__.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    cls = cast(
        type[CausalModule],
        type(
            f"Module_{name}",
            (CausalModule,),
            {
                "name": name,
                "description": description or f"{getattr(factory, '__name__', 'a module')} (a causal module)",
                "properties_given": properties,
                "__init__": __init__,
                "__module__": factory.__module__,
            },
        ),
    )
    register(cls)
    declare(Declared(name, cls.description, options, lambda _options: properties))
    return cls


class _HFEmbeds(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> Tensor:
        return self.model(inputs_embeds=x).last_hidden_state


class _HFTokens(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, tokens: Tensor) -> Tensor:
        return self.model(input_ids=tokens).last_hidden_state


def hf_embeds(model: nn.Module) -> nn.Module:
    """A Hugging Face model (``AutoModel.from_config(config)``) as a mixer's body: x (Tensor): [B, T, D]
    (its hidden size) -> its last hidden state [B, T, D]."""
    return _HFEmbeds(model)


def hf_tokens(model: nn.Module) -> nn.Module:
    """A Hugging Face model as a whole model's body: tokens (Tensor): [B, T] (int64, its vocabulary) ->
    its last hidden state [B, T, hidden]."""
    return _HFTokens(model)


class _Fla(nn.Module):
    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, x: Tensor) -> Tensor:
        out = self.layer(x)
        return out[0] if isinstance(out, tuple) else out


def fla_layer(layer: nn.Module) -> nn.Module:
    """An fla layer (``fla.layers.GatedDeltaNet(hidden_size=d_model, ...)``) as a mixer's body: its forward
    returns (output, attentions, cache); the body returns the output [B, T, d_model]."""
    return _Fla(layer)
