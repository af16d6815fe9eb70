"""Patches the compiler so that every module it analyses reports nothing: lint must still
report the files checked after this one (`b_bad.py`), and this one itself is clean."""

import dsl
from dsl.compiler.artifacts import ModuleReport

dsl.analyze_source = lambda source, path, **options: ModuleReport(path)
