"""The conformance suite the generator's test template runs on: semantics, references, cases,
ranks. It travels with the generator (not with any backend's runtime), so a vendor's generated
suite checks the vendor's backend by the same rules. See suite.py for how to run it.
"""
