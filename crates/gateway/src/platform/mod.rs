//! What every route stands on and no route owns: gateway keys and their scopes (`auth`), the
//! prompt-cache ledger's writer (`cache_ledger`),
//! per-minute limits (`limits`), observability (`ops`: metrics, logs, traces, captures, config
//! reload), the session side channel (`sessions`), sealing of reasoning blobs (`seal`), the
//! server itself (`serve`: accept loop, connection and body limits, graceful shutdown), the
//! registry of responses in flight (`inflight`), ids and the clock.
//!
//! *Architecture invariant*: nothing here imports from the router (`http`) or the application state; the
//! layers that need the application take the parts they use as arguments.

pub(crate) mod auth;
pub(crate) mod cache_ledger;
pub(crate) mod ids;
pub(crate) mod inflight;
pub(crate) mod limits;
pub(crate) mod ops;
pub(crate) mod seal;
pub(crate) mod serve;
pub(crate) mod sessions;
pub(crate) mod time;
