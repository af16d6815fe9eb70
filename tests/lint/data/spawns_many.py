"""Starts 50 sleeping children and a `setsid` daemon, records their pids in `many.pids`
beside this file, and returns: clean, and every one of them must be dead when lint exits."""

import os
import subprocess
import sys
import time
from pathlib import Path

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]
pids = [subprocess.Popen(SLEEP).pid for _ in range(50)]
pids.append(subprocess.Popen(["setsid", *SLEEP]).pid)
read_end, write_end = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(write_end, str(os.getpid()).encode())
        time.sleep(120)
    os._exit(0)
pids.append(int(os.read(read_end, 100)))
Path(__file__).with_name("many.pids").write_text(" ".join(map(str, pids)))
