//! `apiserver.storage.etcd._rpc`: gRPC calls and watch streams to etcd for the asyncio client in
//! apiserver/storage/etcd/native.py. A `Channel` owns one member's connection and a one-thread tokio
//! runtime; `submit` starts calls (`open_stream` a stream, streams.rs), and the event loop collects
//! finished calls and stream answers with `take` when the descriptor `fd` is readable
//! (completions.rs). Python never waits on a lock the runtime holds
//! long, and the runtime never takes the GIL.

mod calls;
mod codec;
mod completions;
mod endpoint;
mod streams;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::uri::PathAndQuery;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::{PyBytes, PyString};
use tonic::client::Grpc;
use tonic::transport::Channel as Connection;
use tonic::Code;

use calls::{failed, unary};
use completions::{Completions, Outcome, Reply};
use endpoint::{endpoint, Target};
use streams::Streams;

#[pyclass(module = "apiserver.storage.etcd._rpc")]
struct Channel {
    runtime: Option<tokio::runtime::Runtime>,
    grpc: Grpc<Connection>,
    completions: Arc<Completions>,
    streams: Streams,
}

impl Channel {
    /// The runtime new calls run on; fails once the channel is closed.
    fn runtime(&self) -> PyResult<&tokio::runtime::Runtime> {
        self.runtime
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("the channel is closed"))
    }

    /// The runtime a new stream runs on, and its method's path.
    fn start(&self, method: &str) -> PyResult<(&tokio::runtime::Runtime, PathAndQuery)> {
        let runtime = self.runtime()?;
        let path = PathAndQuery::try_from(method)
            .map_err(|error| PyValueError::new_err(error.to_string()))?;
        Ok((runtime, path))
    }
}

/// A unary call's method path and deadline, or why they cannot be used.
fn call_target(method: &str, timeout: f64) -> Result<(PathAndQuery, Duration), String> {
    let path = PathAndQuery::try_from(method).map_err(|error| error.to_string())?;
    let deadline = Duration::try_from_secs_f64(timeout).map_err(|error| error.to_string())?;
    Ok((path, deadline))
}

/// One unary call on the runtime, its outcome handed to `reply`.
async fn run_unary(
    grpc: Grpc<Connection>,
    path: PathAndQuery,
    body: Bytes,
    deadline: Duration,
    reply: Reply,
) {
    let outcome = match tokio::time::timeout(deadline, unary(grpc, path, body, deadline)).await {
        Ok(Ok(answer)) => Outcome::Answer(answer),
        Ok(Err(status)) => failed(&status),
        Err(_) => Outcome::Failed(
            Code::DeadlineExceeded as i32,
            "Deadline Exceeded".to_owned(),
        ),
    };
    reply.finish(outcome);
}

#[pymethods]
impl Channel {
    /// A channel to `uri`; it connects on its first call and again after a lost connection.
    #[new]
    #[pyo3(signature = (uri, *, ca=None, cert=None, key=None))]
    fn new(
        uri: &str,
        ca: Option<&[u8]>,
        cert: Option<&[u8]>,
        key: Option<&[u8]>,
    ) -> PyResult<Self> {
        let endpoint = endpoint(&Target { uri, ca, cert, key }).map_err(PyValueError::new_err)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("coreio-etcd-rpc")
            .enable_all()
            .build()
            .map_err(|error| PyRuntimeError::new_err(error.to_string()))?;
        let connection = {
            let _entered = runtime.enter();
            endpoint.connect_lazy()
        };
        let grpc = Grpc::new(connection)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        let completions =
            Completions::new().map_err(|error| PyRuntimeError::new_err(error.to_string()))?;
        Ok(Channel {
            runtime: Some(runtime),
            grpc,
            completions: Arc::new(completions),
            streams: Streams::default(),
        })
    }

    /// The descriptor that turns readable when calls have finished.
    #[getter]
    fn fd(&self) -> i32 {
        self.completions.fd()
    }

    /// Starts each of `calls`: (call, method as `/etcdserverpb.KV/Range`, encoded request,
    /// timeout in seconds). A call fails with DEADLINE_EXCEEDED after its timeout, and with
    /// INVALID_ARGUMENT at once when its method or timeout cannot be used. The batch costs the
    /// runtime's thread one wake-up: one task on it starts the others.
    fn submit(&self, calls: Vec<(u64, PyBackedStr, PyBackedBytes, f64)>) -> PyResult<()> {
        let runtime = self.runtime()?;
        let jobs: Vec<_> = calls
            .into_iter()
            .map(|(call, method, request, timeout)| {
                let reply = Reply::new(call, Arc::clone(&self.completions));
                let body = Bytes::copy_from_slice(&request);
                (
                    reply,
                    self.grpc.clone(),
                    call_target(&method, timeout),
                    body,
                )
            })
            .collect();
        runtime.spawn(async move {
            for (reply, grpc, target, body) in jobs {
                match target {
                    Ok((path, deadline)) => {
                        tokio::spawn(run_unary(grpc, path, body, deadline, reply));
                    }
                    Err(message) => {
                        reply.finish(Outcome::Failed(Code::InvalidArgument as i32, message))
                    }
                }
            }
        });
        Ok(())
    }

    /// Opens the bidirectional stream `call` of `method` (`/etcdserverpb.Watch/Watch`) with the
    /// encoded `first` request; its answers come from `take` as a unary call's do, each to be
    /// acknowledged with `read`, and its end as (call, -1, b"").
    fn open_stream(&self, call: u64, method: &str, first: &[u8]) -> PyResult<()> {
        let (runtime, path) = self.start(method)?;
        let reply = Reply::new(call, Arc::clone(&self.completions));
        let first = Bytes::copy_from_slice(first);
        self.streams
            .open(runtime, self.grpc.clone(), path, first, reply);
        Ok(())
    }

    /// Sends `request` on the open stream `call`; false when it is no longer open.
    fn send(&self, call: u64, request: &[u8]) -> bool {
        self.streams.send(call, Bytes::copy_from_slice(request))
    }

    /// One answer of stream `call` was read: the stream may take one more.
    fn read(&self, call: u64) {
        self.streams.read(call);
    }

    /// Ends stream `call` (etcd sees it cancelled); nothing more of it is taken.
    fn close_stream(&self, call: u64) {
        self.streams.close(call);
    }

    /// The calls finished since the last take: (call, 0, answer bytes) or (call, code, message);
    /// a stream's answers come as (call, 0, answer bytes), its end as (call, -1, b"").
    fn take<'py>(&self, py: Python<'py>) -> Vec<(u64, i32, Bound<'py, PyAny>)> {
        let finished = self.completions.take();
        finished
            .into_iter()
            .map(|(call, outcome)| match outcome {
                Outcome::Answer(answer) => (call, 0, PyBytes::new(py, &answer).into_any()),
                Outcome::Failed(code, message) => {
                    (call, code, PyString::new(py, &message).into_any())
                }
                Outcome::Ended => (call, -1, PyBytes::new(py, b"").into_any()),
            })
            .collect()
    }

    /// Stops the runtime; calls still running never finish (the caller fails them).
    fn close(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[pymodule]
fn _rpc(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Channel>()
}
