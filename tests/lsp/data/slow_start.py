"""Takes 3 s to run its top level, notes each run in the file `$RUNS_LOG` names, and ends
with a top-level error only the compiler tier reports (DSL001 at line 20); `k` compiles."""

import os
import time

import dsl
from dsl import Tensor, f32

time.sleep(3)
with open(os.environ["RUNS_LOG"], "a") as log:
    log.write("ran\n")


@dsl.kernel
def k(x: Tensor[f32, 1]):
    x[dsl.thread_idx.x] = 1.0


raise RuntimeError("only the compiler tier sees this")
