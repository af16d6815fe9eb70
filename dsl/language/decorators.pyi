"""What type checkers see of `dsl.language.decorators`.

A kernel keeps its parameters (a `ParamSpec`), so a launch with a wrong argument count or
type is reported where it is written: `saxpy(x, y, a, n)` gives a `KernelLaunch`, whose
`launch` takes the launch configuration. A jit function is called from plain Python with
arrays of any library (torch, CuPy, NumPy, DLPack) and Python numbers, which its
annotations do not describe (`Tensor[f32]` is no torch tensor), and a `ParamSpec` keeps the
parameters' types with their count. So its call takes any arguments here; `dsl.mypy_plugin`
gives mypy the function's own parameters, each DSL-typed one taking any value, and
`stream=`: a wrong count or keyword is an error there. pyright has no such hook.
"""

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Generic, ParamSpec, TypeAlias, TypeVar, overload, type_check_only

from dsl.compiler.artifacts import CompiledFunction
from dsl.language.types import _Integer

_P = ParamSpec("_P")
_R = TypeVar("_R")

_Extent: TypeAlias = int | _Integer
_Dims: TypeAlias = _Extent | tuple[_Extent, ...] | list[_Extent]

HINT_DEFAULTS: dict[str, Any]

@type_check_only
class KernelLaunch:
    """A kernel applied to its arguments inside a `@jit` function, waiting for `.launch`."""

    def launch(self, grid: _Dims, block: _Dims, smem: _Extent | None = None, stream: Any = None,
               cluster: _Dims | None = None) -> None: ...

class KernelFunction(Generic[_P]):
    fn: Callable[_P, object]
    kernel_name: str
    known_block_size: Any
    target: str | None
    def __init__(self, fn: Callable[_P, object], name: str | None = None, known_block_size: Any = None,
                 target: str | None = None, **hints: Any) -> None: ...
    @property
    def hints(self) -> dict[str, Any]: ...
    def options_key(self) -> tuple[Any, ...]: ...
    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> KernelLaunch: ...

def user_frames(tb: TracebackType | None) -> TracebackType | None: ...
def run_for_the_user(fn: Any, *args: Any, **kwargs: Any) -> Any: ...

class JitFunction(Generic[_P, _R]):
    fn: Callable[_P, _R]
    examples: list[Any] | None
    reference: Any
    tuning: Any
    def __init__(self, fn: Callable[_P, _R], examples: list[Any] | None = None, reference: Any = None) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def compile(self, *args: Any, target: str | None = None, **kwargs: Any) -> CompiledFunction: ...
    @property
    def torch_op(self) -> Any: ...

@overload
def kernel(fn: Callable[_P, object], /) -> KernelFunction[_P]: ...
@overload
def kernel(fn: None = None, *, name: str | None = None, known_block_size: Sequence[int] | None = None,
           maxnreg: int | None = None, minnctapersm: int | None = None, fastmath: bool = False, ftz: bool = False,
           contract: bool = True, debug: bool = False, target: str | None = None,
           ) -> Callable[[Callable[_P, object]], KernelFunction[_P]]: ...
@overload
def jit(fn: Callable[_P, _R], /) -> JitFunction[_P, _R]: ...
@overload
def jit(fn: None = None, *, examples: list[Any] | None = None,
        reference: Any = None) -> Callable[[Callable[_P, _R]], JitFunction[_P, _R]]: ...

# --- autotuning (dsl.language.autotune; appended as its own block) ---------------------------

class _HintOverrides:
    def __enter__(self) -> None: ...
    def __exit__(self, *exc: object) -> None: ...

def hint_overrides(hints: dict[str, Any]) -> _HintOverrides: ...
