"""coreio: an extension API server for RoleBindings and Events."""
