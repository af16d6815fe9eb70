"""The C that every exported source carries, in the order it is pasted: `PRELUDE` before the
export's tables (`c_driver`: the driver loaded at run time, errors, messages; `c_numbers`:
Python's arithmetic and parameter packing), `TABLE_TYPES` with the tables, and `RUNTIME`
after them, since it reads them (`c_calls`: contexts, argument checks, dispatch; `c_launch`:
loading and launching).

Every function is `static inline`, or `static` and marked cold and unused for the error
paths (`KDSL_COLD`), so an export defines no symbol of its own besides its entry points,
several exports link into one program, and helpers an export does not use cost nothing and
draw no warning.
"""

from __future__ import annotations

from dsl.export.c_calls import CALLS
from dsl.export.c_driver import DRIVER
from dsl.export.c_launch import LAUNCH
from dsl.export.c_numbers import NUMBERS

PRELUDE = DRIVER + NUMBERS
RUNTIME = CALLS + LAUNCH

TABLE_TYPES = r"""
/* ----- what the tables below describe ----- */
typedef struct kdsl_image {
    int spec, variant, major, minor, arch_specific; /* a cubin of one specialization for sm_<major><minor>[a] */
    const char *target;
    const unsigned char *data;
    size_t size;
} kdsl_image;

typedef struct kdsl_kernel {
    int variant;
    const char *symbol;
    int static_smem; /* ptxas' figure, used where the driver does not say */
} kdsl_kernel;
"""
