"""Admission: what a write passes besides the kind's validation. `chain` orders the steps as
upstream does; `request` is what each step is asked about; `namespace` is the namespace lifecycle
plugin; `policy` and `webhook` carry the cluster's ValidatingAdmissionPolicies and admission
webhooks."""
