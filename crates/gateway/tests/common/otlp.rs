//! A local OTLP/HTTP receiver for the tests that export spans: every `POST /v1/traces` body,
//! decoded with opentelemetry-proto.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

/// What the receiver got, in order.
pub type Received = Arc<Mutex<Vec<ExportTraceServiceRequest>>>;

/// Starts a receiver on 127.0.0.1:0; its base URL and what it receives.
pub async fn receiver() -> (String, Received) {
    let seen: Received = Arc::default();
    let kept = seen.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: Bytes| {
            let kept = kept.clone();
            async move {
                let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                kept.lock().unwrap().push(request);
                ""
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), seen)
}
