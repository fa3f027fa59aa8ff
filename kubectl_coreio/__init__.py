"""`kubectl coreio`: who may do what in a namespace by coreio's RoleBindings, why a user may or may
not, and which bindings grant nothing for their problems. A kubectl plugin (the console script
`kubectl-coreio`), standalone or in a cluster: it asks the server's access reviews with the
caller's own kubeconfig, so it shows only what the caller may list.

A client of the API only: it never imports the server.
"""
