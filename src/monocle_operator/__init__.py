"""The Monocle operator: a Monocle resource becomes Elasticsearch, the Monocle API and its crawler.

Rooms: :mod:`.api` (the models, which also generate the CRD), ``resources``
(pure builders from spec to manifests) and ``controller`` (thin steps that
read, decide, apply and report).
"""
