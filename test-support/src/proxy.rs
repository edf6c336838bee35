//! A TCP proxy under a test's control, to cut a service off from its database and back.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// Forwards connections from a local port to `upstream` until cut.
pub struct TcpProxy {
    /// The local port to connect to instead of the upstream.
    pub port: u16,
    cut: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
    acceptor: AbortHandle,
}

impl TcpProxy {
    /// Starts forwarding `127.0.0.1:<port>` to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let cut = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (cut2, conns2) = (cut.clone(), connections.clone());
        let acceptor = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if cut2.load(Ordering::SeqCst) {
                    // Refused: the connection is closed at once, like a dead network path.
                    drop(inbound);
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                conns2
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(task.abort_handle());
            }
        })
        .abort_handle();
        Ok(Self {
            port,
            cut,
            connections,
            acceptor,
        })
    }

    /// Drops every open connection and refuses new ones.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for c in self
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            c.abort();
        }
    }

    /// Forwards new connections again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.cut();
        self.acceptor.abort();
    }
}
