"""What lives inside a Typesense cluster, declared as objects: ``plan`` (pure) says what to send
Typesense so that it holds what a TypesenseCollection, TypesenseAlias, TypesenseSynonym or
TypesenseOverride declares; the controller (:mod:`typesense_operator.controller.content.reconcile`)
sends it."""
