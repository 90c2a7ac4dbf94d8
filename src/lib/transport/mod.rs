//! The one gRPC-over-unix-socket transport every dpctl command uses: dialing
//! ([`connect`]), serving ([`bind`], [`serve`]) and dpctl's own control
//! sockets ([`control`]). Nothing else in dpctl touches `UnixStream` or
//! `UnixListener`.

mod authority;
mod client;
pub mod control;
pub mod http2;
mod server;

pub use authority::{AuthorityFix, REPLACEMENT_AUTHORITY, is_valid_authority};
pub use client::{ClientConfig, connect};
pub use http2::server_builder;
pub use server::{BindOptions, Listener, SocketGuard, bind, incoming, serve, shutdown_signal};
