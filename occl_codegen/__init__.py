"""Generates a c10d backend's C++ glue, bindings, registration module, docs and tests from its
spec (occl's is spec/collectives.yaml).

`python -m occl_codegen` runs it; `occl_codegen.loader.load_spec` reads a spec into
`occl_codegen.model`; `occl_codegen.conformance` is what the generated tests run on.
"""
