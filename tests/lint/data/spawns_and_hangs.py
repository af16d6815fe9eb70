"""Starts a child that inherits the run's pipes (stderr included), records its pid in
`spawned.pids` beside this file, then never finishes: DSL002 after the time limit, and the
child must be dead when lint exits."""

import subprocess
import sys
from pathlib import Path

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], close_fds=False)
Path(__file__).with_name("spawned.pids").write_text(str(child.pid))
while True: pass  # noqa: E701
