"""The audit webhook, as kube-apiserver's (--audit-webhook-*): events POSTed as audit.k8s.io/v1
EventLists to the service a kubeconfig names (`client.py`), retried with exponential backoff
(`backoff.py`); in batch mode buffered and sent in batches at a throttled rate (`batch.py`,
`throttle.py`), in the blocking modes sent as each request goes; optionally trimmed to a size
(`truncate.py`). `backend.py` puts them together from the flags."""
