// The pod sandbox's pause program of the local real nodes, our own: it holds the pod's namespaces,
// reaps orphans (a pod that shares its process namespace hands them to it) and exits on SIGINT or
// SIGTERM. Built by operator_testkit.node_tools into the image localhost/pause.
module operator-suite.local/hack/pause

go 1.25.0
