"""Generates the occl backend's C++ glue, bindings and tests from spec/collectives.yaml.

`python -m codegen` runs it; `codegen.loader.load_spec` reads the spec into `codegen.model`.
"""
