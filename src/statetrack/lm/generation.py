"""Text from a trained language model: ``generate(model, tokenizer, prompt, tokens)``.

The prompt is encoded after a BOS token (as every training document starts), read in one forward
call, and then ``tokens`` tokens are drawn one at a time with ``model.step`` (the recurrent state, or
the Transformer's KV cache, carries the context): greedy when ``temperature`` is 0, else sampled from
softmax(logits / temperature), restricted to the ``top_k`` most probable tokens when given, with a
seeded generator. Generation stops early at EOS (the end of a document). Specials are never printed.
"""

from __future__ import annotations

import numpy as np
import torch

from statetrack.errors import UserError


def check_generation(tokens: int, temperature: float, top_k: int | None) -> None:
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise UserError(f"bad number of tokens {tokens!r}; allowed: an integer >= 1")
    if not temperature >= 0 or temperature == float("inf"):
        raise UserError(f"bad temperature {temperature!r}; allowed: a finite number >= 0 (0 = greedy)")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise UserError(f"bad top-k {top_k!r}; allowed: an integer >= 1 (or none)")


@torch.no_grad()
def generate_ids(
    model,
    tokenizer,
    prompt: str,
    tokens: int,
    temperature: float = 0.8,
    top_k: int | None = None,
    seed: int = 0,
) -> list[int]:
    """The ids of the continuation (EOS excluded)."""
    check_generation(tokens, temperature, top_k)
    model = model.eval()
    device = next(model.parameters()).device
    ids = np.concatenate([[tokenizer.bos], tokenizer.encode(prompt)]).astype(np.int64)
    logits, states = model(torch.as_tensor(ids, device=device)[None], model.init_state(1))
    last = logits[0, -1].float()
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    out = []
    for _ in range(tokens):
        nxt = _pick(last.cpu(), temperature, top_k, gen)
        if nxt == tokenizer.eos:
            break
        out.append(nxt)
        lg, states = model.step(torch.tensor([nxt], device=device), states)
        last = lg[0].float()
    return out


def _pick(logits: torch.Tensor, temperature: float, top_k: int | None, gen: torch.Generator) -> int:
    if temperature == 0:
        return int(logits.argmax())
    if top_k is not None and top_k < logits.numel():
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    p = torch.softmax(logits / temperature, -1)
    return int(torch.multinomial(p, 1, generator=gen))


def generate(
    model,
    tokenizer,
    prompt: str,
    tokens: int,
    temperature: float = 0.8,
    top_k: int | None = None,
    seed: int = 0,
) -> str:
    """The continuation of ``prompt`` as text (invalid UTF-8 shown as U+FFFD)."""
    return tokenizer.decode(generate_ids(model, tokenizer, prompt, tokens, temperature, top_k, seed))
