# The Python module's tests run on each device of $BAREGPU_PY_DEVICES (default: the cpu device and
# the simulated Navi31 running its own gfx1100 code), as pytest parameters.
import os
import tempfile

import pytest

# The simulated chips keep their state (and lock) in a directory of this run's own unless the
# runner names one, so that a hang injected here never meets another run's chip.
if "BAREGPU_SIM_STATE_DIR" not in os.environ:
    os.environ["BAREGPU_SIM_STATE_DIR"] = tempfile.mkdtemp(prefix="baregpu-py-state-")

import baregpu  # noqa: E402  (after the environment above)

DEVICES = [d for d in os.environ.get("BAREGPU_PY_DEVICES", "cpu,sim-am:navi31").split(",") if d]


@pytest.fixture(params=DEVICES, scope="session")
def device(request):
    return baregpu.Device(request.param)


@pytest.fixture(scope="session")
def cpu():
    return baregpu.Device("cpu")
