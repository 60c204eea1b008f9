"""Typesense over TLS: ``check`` (pure) says whether a certificate, its key and its CA serve the names
clients use, and why not."""
