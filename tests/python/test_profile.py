# baregpu.profile writes a Chrome / Perfetto trace with the kernels and copies run inside the block.
import json
import os
import subprocess
import sys

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


def test_a_block_inside_a_whole_run_trace(tmp_path):
    # With BAREGPU_PROFILE recording the whole run, a block writes what was recorded so far and the
    # run's trace keeps everything, before and after the block.
    run, block = tmp_path / "run.json", tmp_path / "block.json"
    script = (f"import baregpu, numpy as np\n"
              f"t = baregpu.Tensor(np.ones(4, np.float32), device='cpu')\n"
              f"(t + 1).numpy()\n"
              f"with baregpu.profile({str(block)!r}):\n"
              f"    (t * 2).numpy()\n"
              f"(t * 3).numpy()\n")
    subprocess.run([sys.executable, "-c", script], check=True, env=dict(os.environ, BAREGPU_PROFILE=str(run)))

    def kernels(path):
        events = json.loads(path.read_text())["traceEvents"]
        return [e["name"] for e in events if e.get("cat") == "exec"]
    assert len(kernels(block)) == 2
    assert len(kernels(run)) == 3
