# Zero-copy interop: the buffer protocol, numpy() and DLPack share a realized CPU tensor's memory;
# a GPU's device memory is copied (numpy) or refused with a message (buffer protocol, DLPack).
import gc
import sys

import numpy as np
import pytest

import baregpu


def test_views_share_the_tensors_memory(cpu):
    t = (baregpu.Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=cpu) * 2).realize()
    via_asarray = np.asarray(t)
    via_numpy = t.numpy()
    via_dlpack = np.from_dlpack(t)
    via_memoryview = np.frombuffer(memoryview(t), dtype=np.float32).reshape(3, 4)
    assert via_memoryview.ctypes.data == via_asarray.ctypes.data == via_numpy.ctypes.data == via_dlpack.ctypes.data
    via_asarray[1, 2] = 42.0              # written through one view ...
    assert via_dlpack[1, 2] == 42.0       # ... read through the others
    assert via_numpy[1, 2] == 42.0
    assert memoryview(t).cast("B").cast("f", (3, 4))[1, 2] == 42.0
    via_memoryview[0, 0] = -1.0           # (numpy makes its DLPack imports read-only)
    assert via_dlpack[0, 0] == -1.0 and via_asarray[0, 0] == -1.0
    # The tensor itself holds what was written: a kernel that reads it sees the new values.
    after = (t + 0).numpy()
    assert after[1, 2] == 42.0 and after[0, 0] == -1.0 and after[2, 3] == 22.0


def test_a_view_keeps_the_memory_alive(cpu):
    arr = (baregpu.Tensor(np.full((256, 256), 3, np.float32), device=cpu) + 1).numpy()
    gc.collect()
    # Allocating tensors of the same size would reuse a buffer the view did not hold.
    others = [(baregpu.Tensor(np.zeros((256, 256), np.float32), device=cpu) + 7).realize() for _ in range(4)]
    [o.numpy() for o in others]
    assert (arr == 4).all()


def test_memoryview_format_and_shape(cpu):
    t = baregpu.Tensor(np.ones((2, 5), np.int32), device=cpu).realize()
    m = memoryview(t)
    assert (m.format, m.itemsize, m.shape, m.strides, m.readonly) == ("i", 4, (2, 5), (20, 4), False)
    assert memoryview(baregpu.Tensor(np.ones(3, np.float16), device=cpu)).format == "e"
    with pytest.raises(BufferError, match="bfloat16"):
        memoryview(baregpu.Tensor(np.ones(3, np.float32), device=cpu, dtype="bfloat16"))


def test_dlpack_round_trip(cpu):
    for a in [np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.arange(6, dtype=np.int32), np.ones((2, 2), np.float16)]:
        t = baregpu.from_dlpack(a, device=cpu)
        assert t.dtype == str(a.dtype)
        back = np.from_dlpack(t)
        np.testing.assert_array_equal(back, a)
    # A producer's strides are followed (a non-contiguous numpy view).
    a = np.arange(40, dtype=np.float32).reshape(5, 8)[1:, ::3]
    np.testing.assert_array_equal(np.from_dlpack(baregpu.from_dlpack(a, device=cpu)), a)
    # bfloat16, which numpy cannot hold, between two baregpu tensors.
    b = baregpu.Tensor(np.array([1.5, -2.25, 3.0], np.float32), device=cpu, dtype="bfloat16")
    c = baregpu.from_dlpack(b, device=cpu)
    assert c.dtype == "bfloat16" and c.numpy().tolist() == [1.5, -2.25, 3.0]
    assert b.__dlpack_device__() == (1, 0)  # kDLCPU
    with pytest.raises(TypeError, match="DLPack dtype"):
        baregpu.from_dlpack(np.zeros(3, np.float64), device=cpu)


def test_device_memory_is_copied_or_refused(device):
    t = (baregpu.Tensor(np.arange(6, dtype=np.float32), device=device) + 1).realize()
    np.testing.assert_array_equal(np.asarray(t), np.arange(6) + 1)  # always works: a copy when not shared
    if device.name.startswith("cpu"):
        assert t.__dlpack_device__() == (1, 0)
        return
    assert t.__dlpack_device__() == {"sim-am": (10, 0), "sim-nv": (2, 0), "sim-nvrm": (2, 0), "sim-qcom": (4, 0)}[device.name.split(":")[0]]
    with pytest.raises(BufferError, match="device's own memory"):
        memoryview(t)
    with pytest.raises(baregpu.UnsupportedError, match=device.name + ".*__dlpack__.*device's own memory"):
        t.__dlpack__()


def test_numpy_enters_without_a_copy(cpu):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    refs = sys.getrefcount(a)
    t = baregpu.from_numpy(a, device=cpu)
    assert sys.getrefcount(a) == refs + 1           # the tensor keeps the array alive
    assert np.shares_memory(t.numpy(), a)
    a[1, 1] = 100.0                                 # numpy writes: the tensor and its kernels see it
    assert (t * 2).numpy()[1, 1] == 200.0
    t.numpy()[0, 0] = -5.0                          # writes through the tensor: numpy sees them
    assert a[0, 0] == -5.0
    again = baregpu.from_numpy(a, device=cpu)       # the same memory again: shared too
    assert np.shares_memory(again.numpy(), a)
    del t, again
    gc.collect()
    assert sys.getrefcount(a) == refs               # released once the device is done with it


def test_numpy_that_cannot_be_shared_is_copied(device, cpu):
    a = np.arange(8, dtype=np.float32)
    whole = baregpu.from_numpy(a, device=cpu)       # holds a's range on the cpu device
    cases = {
        "float64": np.arange(8, dtype=np.float64),  # not a baregpu dtype: converted
        "strided": np.arange(16, dtype=np.float32)[::2],
        "read-only": np.frombuffer(np.arange(8, dtype=np.float32).tobytes(), dtype=np.float32),
        "overlapping another import": a[2:],
    }
    for why, x in cases.items():
        t = baregpu.from_numpy(x, device=device)
        np.testing.assert_array_equal(t.numpy(), x.astype(np.float32), err_msg=why)
        x_before = x.copy()
        if x.flags.writeable:
            x[...] = 42
        np.testing.assert_array_equal(t.numpy(), x_before.astype(np.float32), err_msg=why)  # a copy: unchanged
    g = np.arange(4, dtype=np.float32)
    tg = baregpu.from_numpy(g, device=device)
    g[0] = 9
    assert tg.numpy()[0] == (9 if device.name.startswith("cpu") else 0)  # a GPU gets a copy
    assert whole.numpy()[2] == 42                   # the first import saw the write to a[2:]
