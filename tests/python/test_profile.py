# baregpu.profile writes a Chrome / Perfetto trace with the kernels and copies run inside the block.
import json

import numpy as np

import baregpu


def test_trace(device, tmp_path):
    path = tmp_path / "trace.json"
    a = np.ones((64, 64), np.float32)
    with baregpu.profile(str(path)) as p:
        assert p.path == str(path)
        (baregpu.Tensor(a, device=device) @ baregpu.Tensor(a, device=device)).relu().numpy()
    trace = json.loads(path.read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    spans = [e for e in events if e.get("ph") == "X"]
    kernels = [e for e in spans if e.get("cat") == "exec"]
    assert kernels, [e.get("cat") for e in spans]
    assert all(e["dur"] >= 0 for e in spans)
    assert any(device.name in json.dumps(e) for e in events if e.get("ph") == "M")  # the device's track is named
