"""Recipe + profile + overrides -> one validated verl config, rendered to a launcher."""
