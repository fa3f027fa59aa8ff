"""The audit log, as kube-apiserver writes it: a policy (`policy.py`) sets each request's level and
the stages it is logged at, `event.py` builds the audit.k8s.io/v1 Events, and `logfile.py` writes
them as JSON lines to a file rotated as lumberjack rotates upstream's; `webhook/` sends the same
events to a remote service, and `backend.py` hands each event to both."""
