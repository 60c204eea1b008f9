"""The e2e layer: tests whose pods run are in ``nodes/``, on real nodes (its ``control_plane`` is the
real cluster's). A test here runs no pod, and shares the session's control plane where no pod ever
runs (the integration layer's): a control plane of its own would idle through the rest of the run on
two cores that every worker shares.
"""
