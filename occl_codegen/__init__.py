"""Generates the occl backend's C++ glue, bindings and tests from spec/collectives.yaml.

`python -m occl_codegen` runs it; `occl_codegen.loader.load_spec` reads the spec into `occl_codegen.model`.
"""
