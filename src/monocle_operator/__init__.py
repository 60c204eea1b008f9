"""The Monocle operator: a Monocle resource becomes Elasticsearch, the Monocle API and its crawler.

Rooms: ``api`` (models and CRD), ``resources`` (pure builders) and
``controller`` (kopf handlers). The Monocle resource itself lands with its own issue.
"""
