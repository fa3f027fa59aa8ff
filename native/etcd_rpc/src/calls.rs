//! How a call runs on the runtime and how its failure reads in Python: one unary call, and the
//! status codes grpcio would have given.

use bytes::Bytes;
use http::uri::PathAndQuery;
use std::time::Duration;
use tonic::client::Grpc;
use tonic::transport::Channel as Connection;
use tonic::{Code, Request, Status, TimeoutExpired};

use crate::codec::RawCodec;
use crate::completions::Outcome;

pub async fn unary(
    mut grpc: Grpc<Connection>,
    path: PathAndQuery,
    body: Bytes,
    deadline: Duration,
) -> Result<Bytes, Status> {
    grpc.ready()
        .await
        .map_err(|error| Status::unavailable(error.to_string()))?;
    let mut request = Request::new(body);
    request.set_timeout(deadline);
    Ok(grpc.unary(request, path, RawCodec).await?.into_inner())
}

/// A call's failure as grpcio reports it: a status etcd sent as it is; the deadline passing on this
/// side (tonic says CANCELLED, with TimeoutExpired as the cause) as DEADLINE_EXCEEDED; a failure of
/// the connection itself (tonic's UNKNOWN "transport error", with the cause as its source) as
/// UNAVAILABLE, so that the caller tries another member. The causes go into the message.
pub fn failed(status: &Status) -> Outcome {
    let Some(mut cause) = std::error::Error::source(status) else {
        return Outcome::Failed(status.code() as i32, status.message().to_owned());
    };
    let mut message = status.message().to_owned();
    let mut expired = false;
    loop {
        expired |= cause.downcast_ref::<TimeoutExpired>().is_some();
        message = format!("{message}: {cause}");
        match cause.source() {
            Some(next) => cause = next,
            None => break,
        }
    }
    let code = match status.code() {
        _ if expired => Code::DeadlineExceeded,
        Code::Unknown | Code::Internal => Code::Unavailable,
        code => code,
    };
    Outcome::Failed(code as i32, message)
}
