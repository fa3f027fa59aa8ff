//! Bidirectional streams (etcd's Watch): requests sent from Python through a channel, answers queued
//! with the calls' (completions.rs). A stream reads on only while fewer than UNREAD of its answers
//! wait unread in Python, so that a consumer that falls behind holds etcd back through HTTP/2's flow
//! control, as grpcio's stream does, instead of filling memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use http::uri::PathAndQuery;
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::AbortHandle;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::client::Grpc;
use tonic::transport::Channel as Connection;
use tonic::{Request, Status};

use crate::calls::failed;
use crate::codec::RawCodec;
use crate::completions::{Outcome, Reply};

const UNREAD: usize = 64;

struct Stream {
    requests: mpsc::UnboundedSender<Bytes>,
    unread: Arc<Semaphore>,
    task: AbortHandle,
}

#[derive(Default)]
pub struct Streams {
    open: Mutex<HashMap<u64, Stream>>,
}

impl Streams {
    pub fn open(
        &self,
        runtime: &Runtime,
        grpc: Grpc<Connection>,
        path: PathAndQuery,
        first: Bytes,
        reply: Reply,
    ) {
        let call = reply.call();
        let (requests, receiver) = mpsc::unbounded_channel();
        // The receiver is alive: the first request is queued.
        let _ = requests.send(first);
        let unread = Arc::new(Semaphore::new(UNREAD));
        let permits = Arc::clone(&unread);
        let task = runtime
            .spawn(async move {
                let outcome = match follow(grpc, path, receiver, permits, &reply).await {
                    Ok(()) => Outcome::Ended,
                    Err(status) => failed(&status),
                };
                reply.finish(outcome);
            })
            .abort_handle();
        let stream = Stream {
            requests,
            unread,
            task,
        };
        self.lock().insert(call, stream);
    }

    pub fn send(&self, call: u64, request: Bytes) -> bool {
        self.lock()
            .get(&call)
            .is_some_and(|stream| stream.requests.send(request).is_ok())
    }

    pub fn read(&self, call: u64) {
        if let Some(stream) = self.lock().get(&call) {
            stream.unread.add_permits(1);
        }
    }

    pub fn close(&self, call: u64) {
        if let Some(stream) = self.lock().remove(&call) {
            stream.task.abort();
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Stream>> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

async fn follow(
    mut grpc: Grpc<Connection>,
    path: PathAndQuery,
    receiver: mpsc::UnboundedReceiver<Bytes>,
    unread: Arc<Semaphore>,
    reply: &Reply,
) -> Result<(), Status> {
    grpc.ready()
        .await
        .map_err(|error| Status::unavailable(error.to_string()))?;
    let requests = Request::new(UnboundedReceiverStream::new(receiver));
    let mut answers = grpc.streaming(requests, path, RawCodec).await?.into_inner();
    while let Some(answer) = answers.message().await? {
        unread
            .acquire()
            .await
            .map_err(|_| Status::cancelled("the stream closed"))?
            .forget();
        reply.answer(answer);
    }
    Ok(())
}
