"""ValidatingAdmissionPolicy: the cluster's CEL policies applied to coreio's writes, as
k8s.io/apiserver's plugin applies them. `compiled` holds a policy's expressions compiled once per
revision, `evaluation` one policy's decisions for one request, `plugin` the dispatch over policies
and their bindings with upstream's answers."""
