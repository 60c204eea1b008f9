"""The controllers of what lives inside a cluster: TypesenseCollection, TypesenseAlias, TypesenseSynonym
and TypesenseOverride (:mod:`.reconcile`, one shape for the four; a collection's migration behind its
alias, :mod:`.migration`) and TypesenseApiKey (:mod:`.apikeys`: the key in Typesense and its Secret).
Each owns its object in Typesense and its status; :mod:`.scope` is what they share."""
