//! The response store's side of the pipeline, shared by the stages: what a request reads from
//! the store before it is prepared (its history, `history`; the provider state the client did not
//! carry back, `provider_state`) and what a response writes there as it runs and when it ends
//! (`persist`, and the provider state it made). Background runs and the conversations API are
//! clients of the same files.
//!
//! Not here: the store itself (`toolbridge_store`) and reading or cancelling a stored response
//! (`crate::http::stored`).

pub(crate) mod history;
pub(crate) mod late;
pub(super) mod persist;
pub(super) mod provider_state;
pub(crate) mod recent;
