//! The HTTP/2 connection to one etcd member, with the settings the grpcio channel has
//! (apiserver/storage/etcd/client.py): unlimited message sizes, keepalive pings, TLS when asked.

use std::time::Duration;

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// What a channel is made from: the member's URI (`http://host:port` or `https://host:port`) and,
/// for TLS, the PEM bytes of the CA (none: the system's roots) and the client's key pair.
pub struct Target<'a> {
    pub uri: &'a str,
    pub ca: Option<&'a [u8]>,
    pub cert: Option<&'a [u8]>,
    pub key: Option<&'a [u8]>,
}

pub fn endpoint(target: &Target<'_>) -> Result<Endpoint, String> {
    let endpoint = Endpoint::from_shared(target.uri.to_owned())
        .map_err(|error| format!("etcd endpoint {}: {error}", target.uri))?
        // Notice dead connections under quiet periods (etcd permits a ping every 5 s).
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10))
        // Fixed windows: not hyper's adaptive window, whose BDP pings, one for each answer,
        // tripled the CPU of a call and halved the rate of calls made one at a time. A stream's
        // takes a full list's pages without stalls; the connection's is the largest HTTP/2 allows,
        // so that watches whose readers stall (streams.rs) can hold up their own streams only.
        .initial_stream_window_size(Some(8 << 20))
        .initial_connection_window_size(Some(u32::MAX >> 1))
        // As gRPC's connect deadline: a member that drops packets is given up after 20 s.
        .connect_timeout(Duration::from_secs(20))
        .tcp_nodelay(true);
    if !target.uri.starts_with("https://") {
        return Ok(endpoint);
    }
    endpoint
        .tls_config(tls(target))
        .map_err(|error| format!("etcd endpoint {}: TLS: {error}", target.uri))
}

fn tls(target: &Target<'_>) -> ClientTlsConfig {
    let mut config = ClientTlsConfig::new().timeout(Duration::from_secs(20));
    config = match target.ca {
        Some(ca) => config.ca_certificate(Certificate::from_pem(ca)),
        None => config.with_native_roots(),
    };
    if let (Some(cert), Some(key)) = (target.cert, target.key) {
        config = config.identity(Identity::from_pem(cert, key));
    }
    config
}
