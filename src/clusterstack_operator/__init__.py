"""The Cluster Stack operator: ClusterStack, ClusterStackRelease and ClusterAddon on top of Cluster API.

Rooms: ``api`` (models and CRDs), ``resources`` (pure builders) and
``controller`` (thin steps that read, decide, apply and report).
"""
