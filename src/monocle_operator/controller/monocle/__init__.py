"""The Monocle controller: it owns Elasticsearch, the API, the crawler, their config Secret,
Services, Ingress and the update-idents Job, and the Monocle's status (:mod:`.reconcile`: its steps;
:mod:`.status`: pure)."""
