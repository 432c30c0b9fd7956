# Every op the module exposes, against numpy, on each test device.
import numpy as np
import pytest

import baregpu

RNG = np.random.default_rng(7)


def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def check(t, expect, rtol=2e-5, atol=1e-6):
    got = t.numpy()
    assert isinstance(t, baregpu.Tensor)
    assert got.shape == np.shape(expect), (got.shape, np.shape(expect))
    np.testing.assert_allclose(got, expect, rtol=rtol, atol=atol)


def test_creation(device):
    a = rand(3, 5)
    check(baregpu.Tensor(a, device=device), a, 0, 0)
    check(baregpu.tensor([[1, 2], [3, 4]], device=device, dtype="float32"), np.array([[1, 2], [3, 4]], np.float32), 0, 0)
    check(baregpu.zeros((2, 3), device=device), np.zeros((2, 3), np.float32), 0, 0)
    check(baregpu.ones((4,), dtype="int32", device=device), np.ones(4, np.int32), 0, 0)
    check(baregpu.full((2, 2), 7.5, device=device), np.full((2, 2), 7.5, np.float32), 0, 0)
    check(baregpu.arange(6, device=device), np.arange(6, dtype=np.float32), 0, 0)
    r = baregpu.rand((64,), seed=3, device=device).numpy()
    assert r.dtype == np.float32 and (r >= 0).all() and (r < 1).all() and len(np.unique(r)) > 60
    # A seed gives the same values on every device.
    np.testing.assert_array_equal(r, baregpu.rand((64,), seed=3, device="cpu").numpy())
    s = baregpu.Tensor(np.float32(2.5), device=device)
    assert s.shape == () and s.item() == 2.5


def test_dtypes(device):
    f64 = RNG.uniform(-2, 2, (4, 4))
    t = baregpu.Tensor(f64, device=device)
    assert t.dtype == "float32"
    check(t, f64.astype(np.float32), 0, 0)
    i64 = np.arange(-5, 5, dtype=np.int64)
    ti = baregpu.Tensor(i64, device=device)
    assert ti.dtype == "int32" and ti.numpy().dtype == np.int32
    check(ti * 3 - 1, (i64 * 3 - 1).astype(np.int32), 0, 0)
    with pytest.raises(ValueError, match="do not fit int32"):
        baregpu.Tensor(np.array([2**40], np.int64), device=device)
    h = rand(8).astype(np.float16)
    th = baregpu.Tensor(h, device=device)
    assert th.dtype == "float16" and th.numpy().dtype == np.float16
    check(th + th, (h + h), 0, 0)  # numpy also rounds each float16 result to nearest even
    b = rand(8)
    tb = baregpu.Tensor(b, device=device, dtype="bfloat16")
    bits = b.view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).view(np.float32)  # round to nearest even
    assert tb.dtype == "bfloat16"
    check(tb, rounded, 0, 0)
    flags = baregpu.Tensor(np.array([True, False, True]), device=device)
    assert flags.dtype == "bool"
    check(flags.logical_not(), np.array([False, True, False]), 0, 0)
    check(~flags, np.array([False, True, False]), 0, 0)
    check(flags + 1, np.array([2, 1, 2], np.int32), 0, 0)
    check(baregpu.Tensor(np.arange(3, dtype=np.int32), device=device) + 0.5, np.arange(3) + np.float32(0.5), 0, 0)
    check(t.astype("int32"), f64.astype(np.float32).astype(np.int32), 0, 0)
    with pytest.raises(TypeError, match="complex128"):
        baregpu.Tensor(np.zeros(2, np.complex128), device=device)


@pytest.mark.parametrize("name,ref,lo,hi,rtol", [
    ("exp", np.exp, -3, 3, 2e-6),
    ("log", np.log, 0.01, 10, 2e-6),
    ("exp2", np.exp2, -3, 3, 2e-6),
    ("log2", np.log2, 0.01, 10, 2e-6),
    ("sqrt", np.sqrt, 0, 10, 2e-6),
    ("reciprocal", np.reciprocal, 0.1, 10, 2e-6),
    ("relu", lambda x: np.maximum(x, 0), -1, 1, 0),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), -5, 5, 2e-6),
    ("tanh", np.tanh, -3, 3, 2e-5),
    ("gelu", lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), -3, 3, 2e-5),
    ("abs", np.abs, -1, 1, 0),
    ("neg", np.negative, -1, 1, 0),
])
def test_unary(device, name, ref, lo, hi, rtol):
    a = rand(5, 7, lo=lo, hi=hi)
    check(getattr(baregpu.Tensor(a, device=device), name)(), ref(a.astype(np.float64)).astype(np.float32), rtol=rtol, atol=1e-6)


def test_binary_and_broadcast(device):
    a, b, row = rand(4, 6), rand(4, 6, lo=0.5, hi=2), rand(6)
    ta, tb = baregpu.Tensor(a, device=device), baregpu.Tensor(b, device=device)
    check(ta + tb, a + b)
    check(ta - tb, a - b)
    check(ta * tb, a * b)
    check(ta / tb, a / b)
    check(ta + row, a + row)          # a numpy array as the other operand
    check(row * ta, row * a)          # ... on the left: numpy defers to the tensor
    check(2 - ta, 2 - a)
    check(0.5 + ta, 0.5 + a)
    check(3 * ta, 3 * a)
    check(1 / tb, 1 / b)
    check(a.T @ tb, a.T @ b, rtol=1e-4, atol=1e-5)  # numpy array @ tensor
    check(-ta, -a)
    check(abs(ta), np.abs(a))
    check(ta.maximum(tb), np.maximum(a, b))
    check(ta.minimum(0.0), np.minimum(a, 0))
    for op in ["__lt__", "__gt__", "__le__", "__ge__", "__eq__", "__ne__"]:
        check(getattr(ta, op)(tb), getattr(a, op)(b), 0, 0)
    check((ta > 0).where(ta, tb), np.where(a > 0, a, b))
    check(baregpu.where(ta < 0, 0.0, ta), np.where(a < 0, 0, a))
    with pytest.raises(ValueError):
        ta + baregpu.Tensor(rand(5), device=device)


def test_broadcast_exact(device):
    a, c = rand(4, 6, 1), rand(1, 3)
    check(baregpu.Tensor(a, device=device) * baregpu.Tensor(c, device=device), a * c)


def test_reductions(device):
    a = rand(3, 4, 5)
    t = baregpu.Tensor(a, device=device)
    check(t.sum(), a.sum(dtype=np.float64).astype(np.float32), rtol=1e-5)
    check(t.sum(axis=1), a.sum(axis=1), rtol=1e-5)
    check(t.sum(axis=(0, 2), keepdims=True), a.sum(axis=(0, 2), keepdims=True), rtol=1e-5)
    check(t.max(axis=-1), a.max(axis=-1), 0, 0)
    check(t.mean(axis=0), a.mean(axis=0), rtol=1e-5)
    check(t.max(), a.max(), 0, 0)


def test_movement(device):
    a = rand(2, 3, 4)
    t = baregpu.Tensor(a, device=device)
    check(t.reshape(6, 4), a.reshape(6, 4), 0, 0)
    check(t.reshape((4, -1)), a.reshape(4, -1), 0, 0)
    check(t.permute(2, 0, 1), a.transpose(2, 0, 1), 0, 0)
    check(t.transpose(), a.swapaxes(-2, -1), 0, 0)
    check(t.T, a.T, 0, 0)
    check(t.reshape(2, 1, 12).expand(2, 5, 12), np.broadcast_to(a.reshape(2, 1, 12), (2, 5, 12)), 0, 0)
    check(t.pad([(1, 0), (0, 2), (1, 1)]), np.pad(a, [(1, 0), (0, 2), (1, 1)]), 0, 0)
    check(t.shrink([(0, 1), (1, 3), (0, 4)]), a[0:1, 1:3, 0:4], 0, 0)
    check(t.flip(axis=(0, 2)), np.flip(a, axis=(0, 2)), 0, 0)
    check(t[1], a[1], 0, 0)
    check(t[:, 1:, ::-1], a[:, 1:, ::-1], 0, 0)
    check(t[..., 2], a[..., 2], 0, 0)
    check(t[None, -1, :2], a[None, -1, :2], 0, 0)
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(IndexError, match="step"):
        t[:, ::2]
    assert len(t) == 2 and t.ndim == 3 and t.size == 24 and t.shape == (2, 3, 4)


def test_matmul_conv_softmax_layernorm(device):
    a, b = rand(24, 40), rand(40, 16)
    ta, tb = baregpu.Tensor(a, device=device), baregpu.Tensor(b, device=device)
    check(ta @ tb, a @ b, rtol=1e-4, atol=1e-5)
    check(ta.matmul(b), a @ b, rtol=1e-4, atol=1e-5)
    batch = rand(3, 8, 12)
    check(baregpu.Tensor(batch, device=device) @ baregpu.Tensor(b[:12, :5], device=device), batch @ b[:12, :5], rtol=1e-4, atol=1e-5)
    x, w = rand(2, 3, 9, 9), rand(4, 3, 3, 3)
    ref = np.zeros((2, 4, 9, 9), np.float32)
    xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])
    for i in range(3):
        for j in range(3):
            ref += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 9, j:j + 9], w[:, :, i, j])
    check(baregpu.Tensor(x, device=device).conv2d(baregpu.Tensor(w, device=device), padding=1), ref, rtol=1e-4, atol=1e-5)
    s = rand(6, 33, lo=-4, hi=4)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    check(baregpu.Tensor(s, device=device).softmax(), e / e.sum(axis=-1, keepdims=True), rtol=1e-5)
    check(baregpu.Tensor(s, device=device).softmax(axis=0), np.exp(s) / np.exp(s).sum(axis=0), rtol=1e-5)
    ln = (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + 1e-5)
    check(baregpu.Tensor(s, device=device).layernorm(), ln, rtol=1e-4, atol=1e-5)


def test_fused_and_lazy(device):
    a = rand(128, 96)
    t = baregpu.Tensor(a, device=device)
    before = device.kernels_launched
    y = (t * t + 1).sum(axis=1)
    assert device.kernels_launched == before and not y.realized  # nothing ran yet
    assert y.realize() is not None and y.realized
    assert device.kernels_launched == before + 1                 # one fused kernel
    check(y, (a * a + 1).sum(axis=1), rtol=1e-5)
    assert "shape=(128,)" in repr(y) and device.name in repr(y)
    assert y[:3].tolist() == pytest.approx(((a * a + 1).sum(axis=1))[:3].tolist(), rel=1e-5)


def test_to_another_device(device, cpu):
    a = rand(5, 5)
    t = (baregpu.Tensor(a, device=cpu) * 2).to(device)
    assert t.device == device
    check((t + 1).to(cpu), a * 2 + 1)
    assert (t + 1).to("cpu").device == cpu
