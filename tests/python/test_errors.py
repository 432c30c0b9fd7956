# baregpu's errors reach Python as exception classes of the same names, with the same messages and
# the device they are about.
import os

import numpy as np
import pytest

import baregpu

KINDS = {
    "Error": RuntimeError, "TimeoutError": TimeoutError, "DeviceLostError": RuntimeError, "ProtocolError": RuntimeError,
    "BusyError": RuntimeError, "UnsupportedError": RuntimeError, "FirmwareError": ValueError, "SystemError": OSError,
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_error_type(kind):
    cls = getattr(baregpu, kind)
    with pytest.raises(cls) as info:
        baregpu.testing.throw_error(kind, "sim:0000:00:01.0", "what went wrong")
    e = info.value
    assert type(e) is cls and isinstance(e, baregpu.Error) and isinstance(e, KINDS[kind])
    if kind == "FirmwareError":
        assert str(e) == "sim:0000:00:01.0: header.version at offset 8: expected 1, found what went wrong"
        assert (e.file, e.field) == ("sim:0000:00:01.0", "header.version")
    else:
        assert str(e).startswith("sim:0000:00:01.0: what went wrong") and e.device == "sim:0000:00:01.0"
    if kind == "BusyError":
        assert e.owner_pid == 4242
    if kind == "SystemError":
        assert e.errno == 2 and "No such file or directory" in str(e)


def test_unknown_device():
    with pytest.raises(baregpu.Error, match="no backend for 'nosuch'.*known: cpu"):
        baregpu.Device("nosuch:0")


def test_second_owner_is_busy():
    baregpu.Device("sim-am:navi31")
    with pytest.raises(baregpu.BusyError, match=f"in use by process {os.getpid()}") as info:
        baregpu.Device("sim-am:navi31?isa=host")  # the same chip under another name: a second owner
    assert info.value.owner_pid == os.getpid()


def test_hang_times_out_then_the_device_is_lost():
    d = baregpu.Device("sim-am:navi48")
    t = baregpu.Tensor(np.ones(64, np.float32), device=d)
    np.testing.assert_array_equal((t * 2).numpy(), 2)
    assert baregpu.testing.inject_dispatch_hang(d, True)
    (t * 3).realize()
    with pytest.raises(baregpu.TimeoutError, match="sim-am:navi48: synchronize timed out after 300 ms") as info:
        d.synchronize(timeout_ms=300)
    assert info.value.device == "sim-am:navi48"
    baregpu.testing.inject_dispatch_hang(d, False)
    with pytest.raises(baregpu.DeviceLostError, match="error state"):
        (t * 4).numpy()


def test_profile_path_is_checked_first(tmp_path):
    with pytest.raises(baregpu.Error, match="cannot write the profile there"):
        baregpu.profile(str(tmp_path / "no-such-dir" / "trace.json"))


def test_bad_arguments():
    with pytest.raises(TypeError, match="device"):
        baregpu.zeros((2,), device=3)
    with pytest.raises(ValueError, match="timeout_ms"):
        baregpu.Device("cpu").synchronize(timeout_ms=-1)


def test_close_and_open_again():
    d = baregpu.Device("cpu?threads=1")
    assert baregpu.Device("cpu?threads=1") == d      # one device per name
    t = baregpu.Tensor(np.ones(3, np.float32), device=d)
    d.close()
    assert repr(d) == "baregpu.Device(closed)"
    with pytest.raises(ValueError, match="was closed"):
        d.name
    with pytest.raises(ValueError, match="was closed"):
        baregpu.zeros((2,), device=d)
    np.testing.assert_array_equal((t + 1).numpy(), 2)  # a tensor keeps its device
    with baregpu.Device("cpu?threads=1") as again:   # the name opens a new device
        assert again != t.device and again.name == "cpu"
    with pytest.raises(ValueError, match="was closed"):
        again.synchronize()
