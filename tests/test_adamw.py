"""The CPU step's AdamW (``training.adamw``) is torch's AdamW bit for bit, so a run trains to the same
weights as before and a stored run reruns to identical metrics; and it imports no compiler."""

import subprocess
import sys

import pytest
import torch

from statetrack.training.adamw import AdamW


def _params(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    shapes = [(7, 5), (5,), (3, 4, 2), (1,)]
    out = [torch.randn(s, generator=g).requires_grad_() for s in shapes]
    out.append(torch.randn(4, 3, dtype=torch.complex64, generator=g).requires_grad_())
    out.append(torch.randn(2, 2, generator=g))  # no gradient: left alone
    return out


def _groups(ps: list[torch.Tensor]) -> list[dict]:
    """Two groups as no_decay makes them: the second without weight decay."""
    return [{"params": ps[:3]}, {"params": ps[3:], "weight_decay": 0.0}]


@pytest.mark.parametrize("weight_decay,grouped", [(0.0, False), (0.1, False), (0.1, True)])
def test_adamw_is_torchs_adamw_to_the_bit(weight_decay, grouped):
    ours, theirs = _params(0), _params(0)
    form = _groups if grouped else list
    opt = AdamW(form(ours), lr=0.03, weight_decay=weight_decay)
    ref = torch.optim.AdamW(form(theirs), lr=0.03, weight_decay=weight_decay)  # CPU: its one-tensor path
    g = torch.Generator().manual_seed(1)
    for step in range(1, 41):
        # gradients over five orders of magnitude; the second tensor has none every 7th step
        grads = [
            None
            if not p.requires_grad or (step % 7 == 0 and i == 1)
            else torch.randn(p.shape, dtype=p.dtype, generator=g) * 10.0 ** (step % 5 - 2)
            for i, p in enumerate(ours)
        ]
        for p, q, gr in zip(ours, theirs, grads, strict=True):
            p.grad = None if gr is None else gr.clone()
            q.grad = None if gr is None else gr.clone()
        lr = 0.03 * (1 - step / 50)
        opt.lr = lr
        for group in ref.param_groups:
            group["lr"] = lr
        opt.step()
        ref.step()
        for p, q in zip(ours, theirs, strict=True):
            assert torch.equal(p, q), step


def test_a_run_imports_no_compiler(tmp_path):
    """`statetrack train` (its checks, training, evaluation, horizons and checkpoint) and `statetrack eval`
    of its checkpoint import neither torch._dynamo nor sympy: seconds of CPU per run."""
    db = tmp_path / "r.db"
    code = (
        "import sys\n"
        "from statetrack.cli import main\n"
        f"assert main(['train', '--layers', 'mamba', '--steps', '3', '--eval-every', '2', '--val-sequences',"
        f" '8', '--test-lengths', '16,300', '--eval-batch', '8', '--horizons', '--db', {str(db)!r}]) == 0\n"
        f"ckpt = next(p for p in __import__('pathlib').Path({str(tmp_path)!r}).rglob('*.safetensors'))\n"
        "assert main(['eval', str(ckpt), '--lengths', '16']) == 0\n"
        "print(sorted(m for m in ('torch._dynamo', 'sympy', 'torch._inductor') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
