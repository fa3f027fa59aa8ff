"""The etcd v3 backend, speaking etcd's gRPC API directly with the protobuf messages of `aetcd.rpc`.

aetcd's high-level client loses what this layer needs (revisions of list pages and transactions,
progress notifications, explicit watch cancellation) and its `Client` opens only plaintext channels
to a single host, so the channels are made here with grpc.aio (aetcd's own transport) and the raw
KV/Lease/Watch stubs are used on them.

Split by concern, as k8s.io/apiserver's `pkg/storage/etcd3` is:

- `store`: `EtcdStorage`, the Storage protocol (reads, compare-and-swap writes, compaction)
- `client`: the channels to etcd's members, the one in use, a call with failover
- `errors`: gRPC status codes as storage errors
- `keys`: the key prefix; etcd's key-values and events as the protocol's
- `leases`: one lease per TTL, shared by many keys (upstream's lease manager)
- `compactor`: periodic compaction; finding the compacted revision
- `watcher`: a watch over its streams, resumed on another member when one is lost
- `stream`: one watch stream on one member, read with a timeout
- `progress`: when a watch reports progress, and which revision
- `versions`: the etcd releases refused or warned about
"""

from apiserver.storage.etcd.store import EtcdStorage
from apiserver.storage.etcd.versions import ALLOW_DATA_LOSS_RELEASE, judge_version

__all__ = ["ALLOW_DATA_LOSS_RELEASE", "EtcdStorage", "judge_version"]
