//! The server's connections: the accept loop on hyper (`accept`: the connection cap, the header
//! read, idle and body read timeouts) and the server limits with their config section
//! (`limits`). Putting the application on them is the job of `launch`.

pub(crate) mod accept;
pub(crate) mod limits;
