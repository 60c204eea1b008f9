"""The MonocleTask controller: one janitor command, run once as a Job."""
