//! What every kind's endpoints share, written once: the mapped channel a handle and its
//! endpoints hold and the one way to create, open and check it ([`channel`]), taking an
//! entry in a channel's participant table ([`registration`]), watching whether a peer is
//! still alive ([`liveness`]), the one receive contract ([`receive`]) and its
//! sending twin ([`send`]) and the receivers' two iterators
//! ([`iter`]).
//!
//! Each kind keeps what is its own (its layout, its lock-free protocol, what its cleanup
//! repairs); these modules are the machinery around it, so that registering, reclaiming the
//! dead, taking over an exclusive role and the intervals at which a peer's death is noticed
//! behave the same in every kind.

pub(crate) mod channel;
pub(crate) mod forms;
pub(crate) mod iter;
pub(crate) mod liveness;
pub(crate) mod receive;
pub(crate) mod registration;
pub(crate) mod send;
