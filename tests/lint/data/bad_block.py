"""A literal `known_block_size` with a zero: DSL201 (error) from the static checks."""

import dsl


@dsl.kernel(known_block_size=[0, 1, 1])
def k():
    pass
