"""``kubectl typesense``: a kubectl plugin for incidents. ``status`` shows a cluster's quorum, each
node, the recovery or roll under way and the recent Events, from what the operator publishes (the
cluster's status and Events) and the pods; it never talks to the nodes, and needs no admin key."""
