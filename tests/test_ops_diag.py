import torch

from statetrack.ops import diag_scan, diag_scan_ref


def test_real_signed_and_zero_against_reference():
    g = torch.Generator().manual_seed(0)
    a = torch.rand(3, 500, 4, generator=g) * 2 - 1
    a[:, ::7] = 0.0
    b = torch.randn(3, 500, 4, generator=g)
    h0 = torch.randn(3, 4, generator=g)
    ref = diag_scan_ref(a, b, h0)
    out = diag_scan(a.double(), b.double(), h0.double())
    assert torch.allclose(out, ref, atol=1e-12)


def test_complex_unit_circle():
    g = torch.Generator().manual_seed(1)
    theta = torch.rand(2, 300, 3, generator=g) * 6.28
    a = torch.polar(torch.ones_like(theta), theta)
    b = torch.randn(2, 300, 3, dtype=torch.cfloat, generator=g)
    ref = diag_scan_ref(a, b)
    out = diag_scan(a.to(torch.complex128), b.to(torch.complex128))
    assert torch.allclose(out, ref, atol=1e-10)


def test_gradients_match_reference():
    g = torch.Generator().manual_seed(2)
    a = (torch.rand(2, 30, 3, generator=g, dtype=torch.float64) * 2 - 1).requires_grad_()
    b = torch.randn(2, 30, 3, generator=g, dtype=torch.float64).requires_grad_()
    w = torch.randn(2, 30, 3, dtype=torch.float64)
    (diag_scan(a, b) * w).sum().backward()
    ga, gb = a.grad.clone(), b.grad.clone()
    a.grad = b.grad = None
    (diag_scan_ref(a, b) * w).sum().backward()
    assert torch.allclose(ga, a.grad) and torch.allclose(gb, b.grad)
