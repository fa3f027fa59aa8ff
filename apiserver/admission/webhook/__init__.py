"""Admission webhooks: the cluster's ValidatingWebhookConfigurations and
MutatingWebhookConfigurations called on coreio's writes, as k8s.io/apiserver's webhook plugins call
them.

`configuration` reads the webhooks of the configuration objects (in upstream's order, with
upstream's defaults); `selection` decides which of them a request calls (rules, selectors,
matchConditions); `review` writes the AdmissionReview sent and reads the one answered; `client`
POSTs it (TLS, timeouts, service names, a bounded pool); `call` is one call and its failures as
upstream words them; `validating` and `mutating` are the two plugins.

The admissionregistration.k8s.io resources that upstream exempts from webhooks are not served here,
so no request needs exempting.
"""
