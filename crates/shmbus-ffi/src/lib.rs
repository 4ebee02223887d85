//! The C ABI of shmbus: `libshmbus.so` / `libshmbus.a` and the header `include/shmbus.h`
//! (generated from this crate by cbindgen; `docs/c.md` is the guide).
//!
//! Every exported function runs in one guard ([`status`]) that turns a Rust error into a
//! status code and the thread's last error, and a panic into `SHMBUS_PANIC`: no panic
//! crosses the boundary. Handles and the items lent from them are described in [`handle`].

#![allow(non_camel_case_types)]
// The extern functions are documented for C (the header carries their doc comments).
#![warn(missing_docs)]

mod call;
mod errors;
mod handle;

pub mod domain;
pub mod journal;
pub mod pool;
pub mod queue;
pub mod schema;
pub mod service;
pub mod status;
pub mod stream;
pub mod topic;
pub mod waitset;

pub use domain::*;
pub use journal::*;
pub use pool::*;
pub use queue::*;
pub use schema::*;
pub use service::*;
pub use status::*;
pub use stream::*;
pub use topic::*;
pub use waitset::*;
