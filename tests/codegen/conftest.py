# The goldens are rendered output, generated Python tests among them: never collect them here.
collect_ignore = ["golden"]
