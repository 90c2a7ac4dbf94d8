//! The one gRPC-over-unix-socket transport every dpctl command uses: dialing
//! ([`connect`]), serving ([`bind`], [`serve`]) and dpctl's own control
//! sockets ([`control`]). Nothing else in dpctl touches `UnixStream` or
//! `UnixListener`.

mod authority;
mod client;
pub mod codec;
pub mod control;
pub mod guard;
pub mod http2;
mod server;
pub mod wire;

pub use authority::{
    AuthorityFix, MAX_HEADER_LIST, MAX_HUFFMAN_BYTES, MAX_HUFFMAN_STRINGS, REPLACEMENT_AUTHORITY, is_valid_authority,
};
pub use client::{ClientConfig, connect};
pub use http2::server_builder;
pub use server::{
    BindOptions, ConnectionLimits, HANDSHAKE_TIMEOUT, IDLE_TIMEOUT, Listener, MAX_CONNECTIONS, SocketGuard,
    accept_failed, bind, incoming, incoming_with, is_stale, serve, serve_with,
};
pub use wire::{Tap, WireChannel, WireEvent, WireService};
