"""A per-thread array that starts as Python ints and is filled with DSL integers, as the DSL
allows (each element becomes a register). mypy accepts it through `dsl.mypy_plugin`;
pyright cannot (a DSL integer is no `int`), which `test_inference.py` records. Never run."""

import dsl
from dsl import Tensor, i32


@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32]):
    t = dsl.thread_idx.x
    acc = [0] * 4
    for q in dsl.static_range(4):
        acc[q] += t * (q + 1)  # store
    acc.append(t)  # append
    acc.insert(0, t)  # insert
    out[t] = sum(acc)
