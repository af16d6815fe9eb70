"""An annotation that is not a DSL value type: DSL102 (warning) and nothing worse."""

import dsl


@dsl.kernel
def k(x: str):
    pass
