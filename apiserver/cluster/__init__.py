"""The cluster coreio runs in, as a client sees it: connections and informers over kube-apiserver."""
