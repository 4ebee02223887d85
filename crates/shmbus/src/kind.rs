//! The channel kinds: the number every segment header carries and the name tools print.
//!
//! The lowest layer of the kinds' identity: errors, segments and every kind name a kind by
//! it; what each kind tells tools about itself is in [`describe`](crate::describe).

/// The six channel kinds (journals live in directories, not segments, but share the enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Kind {
    /// Broadcast pub/sub with history.
    Topic = 1,
    /// Bounded MPMC queue.
    Queue = 2,
    /// SPSC byte stream over a double-mapped ring.
    Stream = 3,
    /// Work-dispatch pool.
    Pool = 4,
    /// Persistent journal.
    Journal = 5,
    /// Request/response service.
    Service = 6,
}

impl Kind {
    /// The kind with header number `n`.
    pub fn from_u32(n: u32) -> Option<Kind> {
        Some(match n {
            1 => Kind::Topic,
            2 => Kind::Queue,
            3 => Kind::Stream,
            4 => Kind::Pool,
            5 => Kind::Journal,
            6 => Kind::Service,
            _ => return None,
        })
    }

    /// Lower-case name, as tools print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Topic => "topic",
            Kind::Queue => "queue",
            Kind::Stream => "stream",
            Kind::Pool => "pool",
            Kind::Journal => "journal",
            Kind::Service => "service",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
