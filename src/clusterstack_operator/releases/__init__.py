"""Pure decisions about cluster stack releases: versions and names (both spellings, their order), and
which releases a ClusterStack keeps. No I/O."""
