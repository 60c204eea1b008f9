"""The Typesense operator: a TypesenseCluster resource becomes a running Typesense raft cluster.

Rooms: :mod:`.api` (the models, which also generate the CRD), ``resources``
(pure builders from spec to manifests) and ``controller`` (thin steps that
read, decide, apply and report).
"""
