"""Runs the Python module's pytest suite (tests/python), or says why it cannot and exits 77
(meson's SKIP) when numpy or pytest is missing from the interpreter the module was built for."""
import os
import sys

missing = [m for m in ("numpy", "pytest") if __import__("importlib.util").util.find_spec(m) is None]
if missing:
    print(f"SKIP: {sys.executable} has no {' or '.join(missing)} (Debian: python3-numpy, python3-pytest)")
    sys.exit(77)

import pytest  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
# -p no:cacheprovider: the source tree stays as it was.
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-o", "console_output_style=classic", here] + sys.argv[1:]))
