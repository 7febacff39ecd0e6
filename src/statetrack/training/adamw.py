"""AdamW for the CPU step, on torch's ``_foreach`` ops.

``torch.optim.AdamW`` on the CPU runs its one-tensor-at-a-time path (a dozen Python-level ops per parameter
tensor), and every ``torch.optim.Optimizer`` imports ``torch._dynamo`` at its first step (its ``step`` and
``zero_grad`` are wrapped to be skipped by the compiler): about 1.2 s of CPU per process. :class:`AdamW` is the
same update on the whole list of tensors at once, with no import of the compiler. It is torch's update bit for
bit (the same ops in the same order on every element: ``tests/test_adamw.py`` checks it against
``torch.optim.AdamW`` over many steps), so a run trains to the same weights and a stored run reruns to
identical metrics.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor


def _real(t: Tensor) -> Tensor:
    return torch.view_as_real(t) if t.is_complex() else t


class AdamW:
    """AdamW (decoupled weight decay; betas 0.9, 0.999; eps 1e-8; no amsgrad) over ``params``.

    ``lr`` is read at each :meth:`step` (set it for a schedule). Parameters without a gradient are
    skipped, as torch skips them."""

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict],
        lr: float,
        weight_decay: float = 1e-2,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        # torch's forms: a list of tensors, or of groups {"params": [...], "weight_decay": optional}
        groups: list[dict[str, Any]] = [g if isinstance(g, dict) else {"params": [g]} for g in params]
        self.params: list[Tensor] = []
        self.decay: dict[Tensor, float] = {}
        for g in groups:
            for p in g["params"]:
                if p.requires_grad:
                    self.params.append(p)
                    self.decay[p] = float(g.get("weight_decay", weight_decay))
        self.lr, self.weight_decay, self.betas, self.eps = lr, weight_decay, betas, eps
        self.state: dict[Tensor, tuple[Tensor, Tensor]] = {}  # param -> (exp_avg, exp_avg_sq)
        self.steps: dict[Tensor, int] = {}

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        live = [p for p in self.params if p.grad is not None]
        if not live:
            return
        for p in live:
            if p not in self.state:
                self.state[p] = (
                    torch.zeros_like(p, memory_format=torch.preserve_format),
                    torch.zeros_like(p, memory_format=torch.preserve_format),
                )
                self.steps[p] = 0
            self.steps[p] += 1
        beta1, beta2 = self.betas
        params = [_real(p) for p in live]
        grads = [_real(p.grad) for p in live]  # type: ignore[arg-type]
        avgs = [_real(self.state[p][0]) for p in live]
        sqs = [_real(self.state[p][1]) for p in live]
        lr = self.lr
        by: dict[float, list[Tensor]] = {}
        for p, x in zip(live, params, strict=True):
            by.setdefault(self.decay[p], []).append(x)
        for wd, xs in by.items():
            if wd != 0:
                torch._foreach_mul_(xs, 1 - lr * wd)
        torch._foreach_lerp_(avgs, grads, 1 - beta1)
        torch._foreach_mul_(sqs, beta2)
        torch._foreach_addcmul_(sqs, grads, grads, 1 - beta2)
        # torch's step counts are float32 tensors read back as floats: the same values as these ints
        counts = [float(self.steps[p]) for p in live]
        step_sizes = [-(lr / (1 - beta1**n)) for n in counts]
        denom = torch._foreach_sqrt(sqs)  # noqa: SLF001 - torch's foreach ops have no public name
        torch._foreach_div_(denom, [(1 - beta2**n) ** 0.5 for n in counts])
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(params, avgs, denom, step_sizes)
