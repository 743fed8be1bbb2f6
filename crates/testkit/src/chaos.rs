//! TCP plumbing for chaos tests across processes: a [`Proxy`] between gateways and a service
//! (PostgreSQL, Redis) that can be paused (bytes stop flowing, connections stay open) or
//! stopped (every connection closed, new ones closed at once), and a round-robin [`Balancer`]
//! in front of several gateways whose backends can be replaced while it runs.
//!
//! Not here: what a test does with them. Both listen on 127.0.0.1:0 and live until the test's
//! runtime ends.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What a [`Proxy`] does with its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Open,
    /// Bytes stop flowing both ways; connections stay open.
    Paused,
    /// Connections are closed, and new ones closed as soon as they are accepted.
    Stopped,
}

/// A TCP proxy on 127.0.0.1:0 to one target.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    mode: Arc<watch::Sender<Mode>>,
}

impl Proxy {
    /// Starts proxying to `target` (`host:port`), open.
    pub async fn start(target: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mode = Arc::new(watch::channel(Mode::Open).0);
        let target = target.to_owned();
        let modes = mode.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *modes.borrow() == Mode::Stopped {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&target).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pipe(client_read, server_write, modes.subscribe()));
                tokio::spawn(pipe(server_read, client_write, modes.subscribe()));
            }
        });
        Self { addr, mode }
    }

    /// The address to connect to instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}

/// Copies bytes one way, holding them while paused, ending when stopped or at EOF.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut mode: watch::Receiver<Mode>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            () = stopped(&mut mode) => return,
        };
        loop {
            let now = *mode.borrow_and_update();
            match now {
                Mode::Open => break,
                Mode::Stopped => return,
                Mode::Paused => {
                    if mode.changed().await.is_err() {
                        return;
                    }
                }
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

async fn stopped(mode: &mut watch::Receiver<Mode>) {
    loop {
        if *mode.borrow_and_update() == Mode::Stopped {
            return;
        }
        if mode.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A round-robin TCP balancer on 127.0.0.1:0: each accepted connection goes to the next
/// backend slot, or, when that backend refuses the connection (a process that is gone), to the
/// slots after it, as nginx's `proxy_next_upstream` does for connect errors. A backend that
/// dies mid-connection takes its client connections with it.
#[derive(Debug, Clone)]
pub struct Balancer {
    addr: SocketAddr,
    slots: Arc<Slots>,
}

#[derive(Debug)]
struct Slots {
    backends: Mutex<Vec<SocketAddr>>,
    next: AtomicUsize,
    /// Connections open now, per slot.
    active: Vec<AtomicUsize>,
    /// Connections made, per slot.
    served: Vec<AtomicUsize>,
}

/// Counts a connection open on its slot until dropped.
struct Open<'a>(&'a AtomicUsize);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Balancer {
    /// Starts balancing over `backends` (one slot each).
    pub async fn start(backends: Vec<SocketAddr>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let n = backends.len();
        let slots = Arc::new(Slots {
            backends: Mutex::new(backends),
            next: AtomicUsize::new(0),
            active: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            served: (0..n).map(|_| AtomicUsize::new(0)).collect(),
        });
        let shared = slots.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let slots = shared.clone();
                tokio::spawn(async move { slots.serve(client).await });
            }
        });
        Self { addr, slots }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Points slot `slot` at `backend` (a restarted process on a new port); connections open
    /// on the old one are left alone.
    pub fn replace(&self, slot: usize, backend: SocketAddr) {
        self.slots.backends.lock().unwrap()[slot] = backend;
    }

    /// Connections open now through slot `slot`.
    pub fn active(&self, slot: usize) -> usize {
        self.slots.active[slot].load(Ordering::SeqCst)
    }

    /// Connections made through each slot so far.
    pub fn served(&self) -> Vec<usize> {
        self.slots
            .served
            .iter()
            .map(|s| s.load(Ordering::SeqCst))
            .collect()
    }
}

impl Slots {
    async fn serve(&self, mut client: TcpStream) {
        let backends = self.backends.lock().unwrap().clone();
        let first = self.next.fetch_add(1, Ordering::SeqCst);
        for step in 0..backends.len() {
            let slot = (first + step) % backends.len();
            let Ok(mut server) = TcpStream::connect(backends[slot]).await else {
                continue;
            };
            self.served[slot].fetch_add(1, Ordering::SeqCst);
            self.active[slot].fetch_add(1, Ordering::SeqCst);
            let _open = Open(&self.active[slot]);
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            return;
        }
        // No backend would take it: the client sees its connection closed.
    }
}
