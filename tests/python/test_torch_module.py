"""normkit.torch.RMSNorm as a drop-in for torch.nn.RMSNorm."""

from __future__ import annotations

import nk_reference as ref
import pytest

torch = pytest.importorskip("torch")
nt = pytest.importorskip("normkit.torch")

CONSTRUCTORS = [
    ((64,), {}),
    ((64,), {"eps": 1e-5}),
    (([4, 16],), {"eps": 1e-6}),
    ((64,), {"elementwise_affine": False}),
    ((64,), {"dtype": torch.bfloat16}),
]


@pytest.mark.parametrize("args,kwargs", CONSTRUCTORS)
def test_same_module_surface(torch_device, args, kwargs):
    torch.manual_seed(0)
    theirs = torch.nn.RMSNorm(*args, device=torch_device, **kwargs)
    ours = nt.RMSNorm(*args, device=torch_device, **kwargs)
    assert isinstance(ours, torch.nn.RMSNorm)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [(n, p.shape, p.dtype) for n, p in ours.named_parameters()] == [
        (n, p.shape, p.dtype) for n, p in theirs.named_parameters()
    ]
    if theirs.weight is not None:
        with torch.no_grad():
            theirs.weight.normal_(1.0, 0.2)
    ours.load_state_dict(theirs.state_dict())

    dtype = kwargs.get("dtype", torch.float32)
    x = torch.randn(3, 5, *theirs.normalized_shape).to(torch_device, dtype)
    y = ours(x)
    assert y.dtype == theirs(x).dtype and y.shape == x.shape
    k = len(theirs.normalized_shape)
    eps = theirs.eps if theirs.eps is not None else torch.finfo(dtype).eps
    w = None if theirs.weight is None else theirs.weight.detach().flatten().double().cpu().numpy()
    want, _, scale = ref.forward(x.flatten(-k).double().cpu().numpy(), w, eps=eps)
    name = {torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype]
    ref.assert_close(y.flatten(-k).detach().double().cpu().numpy(), want, scale, name, "y")


def test_gradients_match_torch(torch_device):
    torch.manual_seed(1)
    theirs = torch.nn.RMSNorm([4, 16], eps=1e-6, device=torch_device)
    with torch.no_grad():
        theirs.weight.normal_(1.0, 0.2)
    ours = nt.RMSNorm([4, 16], eps=1e-6, device=torch_device)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(3, 4, 16, device=torch_device, requires_grad=True)
    dy = torch.randn(3, 4, 16, device=torch_device)
    g_ours = torch.autograd.grad(ours(x), [x, ours.weight], dy)
    g_theirs = torch.autograd.grad(theirs(x), [x, theirs.weight], dy)
    for a, b in zip(g_ours, g_theirs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_float64_falls_back_to_torch():
    m = nt.RMSNorm(8, dtype=torch.float64)
    x = torch.randn(2, 8, dtype=torch.float64)
    torch.testing.assert_close(m(x), torch.nn.functional.rms_norm(x, (8,), m.weight))


def test_wrong_trailing_shape():
    with pytest.raises(RuntimeError, match="trailing shape"):
        nt.RMSNorm(8)(torch.randn(2, 9))
