//! The attachment each bridged message carries on Zenoh.
//!
//! A bridge never changes a payload: what it adds travels in the Zenoh sample's attachment,
//! a fixed little-endian record that any Zenoh program can read:
//!
//! | bytes | field | |
//! |---|---|---|
//! | 0..2 | magic `SB` | |
//! | 2 | format version, 1 | |
//! | 3 | kind: 1 topic message, 2 journal entry | |
//! | 4..20 | origin: the forwarding bridge's random id | loop prevention |
//! | 20..28 | topic: the message's sequence number; journal: the entry's index | |
//! | 28..36 | topic: its CLOCK_MONOTONIC publish time (the origin host's clock); journal: the entry's CLOCK_REALTIME time | |
//! | 36..44 | topic: its publish time on CLOCK_REALTIME (converted on the origin host) | topic only |
//! | 44..48 | topic: the origin topic's largest message | topic only |
//! | 48..52 | topic: the origin topic's history | topic only |
//! | 52 | topic: its delivery policy (0 overwrite, 1 block, 2 fail) | topic only |
//! | 53..56 | zero | topic only |
//! | 36..52 | journal: the source journal's random identity ([`shmbus::Journal::id`]) | journal only |
//!
//! A topic record is 56 bytes, a journal record 52.
//!
//! **Batches.** When a bridge finds several messages of a topic waiting, it sends them as one
//! sample (at most [`MAX_BATCH`] messages, about [`BATCH_BYTES`] of payload): the payload is
//! the messages one after another, and the attachment is kind 3:
//!
//! | bytes | field |
//! |---|---|
//! | 0..20 | magic, version, kind 3, origin, as above |
//! | 20..24 | the origin topic's largest message |
//! | 24..28 | its history |
//! | 28 | its delivery policy |
//! | 29..32 | zero |
//! | 32..36 | the number of messages n (2 ..= 1024) |
//! | 36 + 28 i .. | message i: sequence number (8), CLOCK_MONOTONIC time (8), CLOCK_REALTIME time (8), length (4) |
//!
//! The lengths add up to the payload's. A single waiting message is always sent alone, as
//! kind 1.
//!
//! [`decode`] checks the length, the magic, the version, the kind and every field's range,
//! and never panics on any input.

use std::fmt;

/// The bytes of a bridge's id.
pub const ID_LEN: usize = 16;
/// A bridge's random id, the origin of what it forwards.
pub type BridgeId = [u8; ID_LEN];

const MAGIC: [u8; 2] = *b"SB";
const VERSION: u8 = 1;
const KIND_TOPIC: u8 = 1;
const KIND_ENTRY: u8 = 2;
const KIND_BATCH: u8 = 3;
/// The most messages one batch carries.
pub const MAX_BATCH: usize = 1024;
/// A forwarding thread stops adding to a batch once it holds this much payload.
pub const BATCH_BYTES: usize = 64 << 10;
const BATCH_HEAD: usize = 36;
const BATCH_ITEM: usize = 28;
/// The length of a topic message's attachment.
pub const TOPIC_LEN: usize = 56;
/// The length of a journal entry's attachment.
pub const ENTRY_LEN: usize = 52;

/// What a topic message's attachment says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicMeta {
    /// The bridge that forwarded it.
    pub origin: BridgeId,
    /// Its sequence number in the origin topic.
    pub seq: u64,
    /// Its publish time, CLOCK_MONOTONIC of the origin host.
    pub ts_mono_ns: u64,
    /// Its publish time on CLOCK_REALTIME.
    pub ts_real_ns: u64,
    /// The origin topic's largest message.
    pub max_message_len: u32,
    /// The origin topic's history.
    pub history: u32,
    /// The origin topic's delivery policy (`shmbus::DeliveryPolicy` as a number).
    pub policy: u8,
}

/// What a journal entry's attachment says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryMeta {
    /// The bridge that served it.
    pub origin: BridgeId,
    /// Its index in the origin journal.
    pub index: u64,
    /// Its time, CLOCK_REALTIME.
    pub ts_ns: u64,
    /// The source journal's identity: a replica copies one journal only.
    pub journal: [u8; 16],
}

/// One message of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchItem {
    /// Its sequence number in the origin topic.
    pub seq: u64,
    /// Its publish time, CLOCK_MONOTONIC of the origin host.
    pub ts_mono_ns: u64,
    /// Its publish time on CLOCK_REALTIME.
    pub ts_real_ns: u64,
    /// Its length in the payload.
    pub len: u32,
}

/// What a batch's attachment says: the topic's parameters and each message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicBatch {
    /// The bridge that forwarded it.
    pub origin: BridgeId,
    /// The origin topic's largest message.
    pub max_message_len: u32,
    /// The origin topic's history.
    pub history: u32,
    /// The origin topic's delivery policy.
    pub policy: u8,
    /// The messages, in order.
    pub items: Vec<BatchItem>,
}

/// A decoded attachment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attachment {
    /// A topic message.
    Topic(TopicMeta),
    /// A journal entry.
    Entry(EntryMeta),
    /// Several topic messages.
    Batch(TopicBatch),
}

/// Why an attachment was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// No attachment at all: the sample was not sent by a bridge.
    Missing,
    /// Too short or too long for its kind.
    Length {
        /// The length found.
        len: usize,
    },
    /// Not a bridge record.
    Magic,
    /// A format version this build does not know.
    Version(u8),
    /// A kind this build does not know.
    Kind(u8),
    /// A field out of its range.
    Field(&'static str),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Missing => write!(f, "no attachment (not sent by a shmbus bridge)"),
            WireError::Length { len } => write!(f, "attachment of {len} bytes fits no record"),
            WireError::Magic => write!(f, "attachment is not a shmbus bridge record"),
            WireError::Version(v) => write!(f, "attachment format version {v}; this bridge reads version {VERSION}"),
            WireError::Kind(k) => write!(f, "attachment of unknown kind {k}"),
            WireError::Field(what) => write!(f, "attachment field out of range: {what}"),
        }
    }
}

impl std::error::Error for WireError {}

impl TopicMeta {
    /// The attachment's bytes.
    pub fn encode(&self) -> [u8; TOPIC_LEN] {
        let mut b = [0u8; TOPIC_LEN];
        head(&mut b, KIND_TOPIC, &self.origin);
        b[20..28].copy_from_slice(&self.seq.to_le_bytes());
        b[28..36].copy_from_slice(&self.ts_mono_ns.to_le_bytes());
        b[36..44].copy_from_slice(&self.ts_real_ns.to_le_bytes());
        b[44..48].copy_from_slice(&self.max_message_len.to_le_bytes());
        b[48..52].copy_from_slice(&self.history.to_le_bytes());
        b[52] = self.policy;
        b
    }
}

impl TopicBatch {
    /// The attachment's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; BATCH_HEAD + BATCH_ITEM * self.items.len()];
        head(&mut b, KIND_BATCH, &self.origin);
        b[20..24].copy_from_slice(&self.max_message_len.to_le_bytes());
        b[24..28].copy_from_slice(&self.history.to_le_bytes());
        b[28] = self.policy;
        b[32..36].copy_from_slice(&(self.items.len() as u32).to_le_bytes());
        for (i, it) in self.items.iter().enumerate() {
            let at = BATCH_HEAD + BATCH_ITEM * i;
            b[at..at + 8].copy_from_slice(&it.seq.to_le_bytes());
            b[at + 8..at + 16].copy_from_slice(&it.ts_mono_ns.to_le_bytes());
            b[at + 16..at + 24].copy_from_slice(&it.ts_real_ns.to_le_bytes());
            b[at + 24..at + 28].copy_from_slice(&it.len.to_le_bytes());
        }
        b
    }

    /// The batch's topic parameters as a [`TopicMeta`] (of its first message).
    pub fn meta(&self) -> TopicMeta {
        let first = self.items.first().copied().unwrap_or(BatchItem { seq: 1, ts_mono_ns: 0, ts_real_ns: 0, len: 0 });
        TopicMeta {
            origin: self.origin,
            seq: first.seq,
            ts_mono_ns: first.ts_mono_ns,
            ts_real_ns: first.ts_real_ns,
            max_message_len: self.max_message_len,
            history: self.history,
            policy: self.policy,
        }
    }

    /// The total payload length the items say.
    pub fn payload_len(&self) -> u64 {
        self.items.iter().map(|i| u64::from(i.len)).sum()
    }
}

impl EntryMeta {
    /// The attachment's bytes.
    pub fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut b = [0u8; ENTRY_LEN];
        head(&mut b, KIND_ENTRY, &self.origin);
        b[20..28].copy_from_slice(&self.index.to_le_bytes());
        b[28..36].copy_from_slice(&self.ts_ns.to_le_bytes());
        b[36..52].copy_from_slice(&self.journal);
        b
    }
}

fn head(b: &mut [u8], kind: u8, origin: &BridgeId) {
    b[0..2].copy_from_slice(&MAGIC);
    b[2] = VERSION;
    b[3] = kind;
    b[4..20].copy_from_slice(origin);
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

/// Reads an attachment, checking everything; any byte string is a valid input.
pub fn decode(b: &[u8]) -> Result<Attachment, WireError> {
    if b.len() < 4 {
        return Err(WireError::Length { len: b.len() });
    }
    if b[0..2] != MAGIC {
        return Err(WireError::Magic);
    }
    if b[2] != VERSION {
        return Err(WireError::Version(b[2]));
    }
    let want = match b[3] {
        KIND_TOPIC => TOPIC_LEN,
        KIND_ENTRY => ENTRY_LEN,
        KIND_BATCH if b.len() >= BATCH_HEAD => {
            let n = u32_at(b, 32) as usize;
            if !(2..=MAX_BATCH).contains(&n) {
                return Err(WireError::Field("batch size"));
            }
            BATCH_HEAD + BATCH_ITEM * n
        }
        KIND_BATCH => return Err(WireError::Length { len: b.len() }),
        k => return Err(WireError::Kind(k)),
    };
    if b.len() != want {
        return Err(WireError::Length { len: b.len() });
    }
    let mut origin = [0u8; ID_LEN];
    origin.copy_from_slice(&b[4..20]);
    if b[3] == KIND_ENTRY {
        let mut journal = [0u8; 16];
        journal.copy_from_slice(&b[36..52]);
        return Ok(Attachment::Entry(EntryMeta { origin, index: u64_at(b, 20), ts_ns: u64_at(b, 28), journal }));
    }
    if b[3] == KIND_BATCH {
        let (max_message_len, history, policy) = (u32_at(b, 20), u32_at(b, 24), b[28]);
        check_topic(max_message_len, history, policy, &b[29..32])?;
        let items: Vec<BatchItem> = (0..u32_at(b, 32) as usize)
            .map(|i| {
                let at = BATCH_HEAD + BATCH_ITEM * i;
                BatchItem {
                    seq: u64_at(b, at),
                    ts_mono_ns: u64_at(b, at + 8),
                    ts_real_ns: u64_at(b, at + 16),
                    len: u32_at(b, at + 24),
                }
            })
            .collect();
        if items.iter().any(|i| i.seq == 0) {
            return Err(WireError::Field("sequence number 0"));
        }
        return Ok(Attachment::Batch(TopicBatch { origin, max_message_len, history, policy, items }));
    }
    let meta = TopicMeta {
        origin,
        seq: u64_at(b, 20),
        ts_mono_ns: u64_at(b, 28),
        ts_real_ns: u64_at(b, 36),
        max_message_len: u32_at(b, 44),
        history: u32_at(b, 48),
        policy: b[52],
    };
    if meta.seq == 0 {
        return Err(WireError::Field("sequence number 0"));
    }
    check_topic(meta.max_message_len, meta.history, meta.policy, &b[53..56])?;
    Ok(Attachment::Topic(meta))
}

/// The topic parameters' ranges, and zero reserved bytes.
fn check_topic(max_message_len: u32, history: u32, policy: u8, reserved: &[u8]) -> Result<(), WireError> {
    if max_message_len == 0 {
        return Err(WireError::Field("largest message 0"));
    }
    if history == 0 {
        return Err(WireError::Field("history 0"));
    }
    if shmbus::DeliveryPolicy::from_u64(u64::from(policy)).is_none() {
        return Err(WireError::Field("delivery policy"));
    }
    if reserved.iter().any(|&c| c != 0) {
        return Err(WireError::Field("reserved bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic() -> TopicMeta {
        TopicMeta {
            origin: [7; ID_LEN],
            seq: 42,
            ts_mono_ns: 1,
            ts_real_ns: 2,
            max_message_len: 64,
            history: 16,
            policy: 1,
        }
    }

    fn batch() -> TopicBatch {
        let it = |seq| BatchItem { seq, ts_mono_ns: seq * 10, ts_real_ns: seq * 20, len: 3 };
        TopicBatch { origin: [5; ID_LEN], max_message_len: 64, history: 8, policy: 0, items: vec![it(1), it(2), it(3)] }
    }

    #[test]
    fn round_trips() {
        assert_eq!(decode(&batch().encode()), Ok(Attachment::Batch(batch())));
        assert_eq!(batch().payload_len(), 9);
        assert_eq!(decode(&topic().encode()), Ok(Attachment::Topic(topic())));
        let e = EntryMeta { origin: [1; ID_LEN], index: u64::MAX, ts_ns: 5, journal: [7; 16] };
        assert_eq!(decode(&e.encode()), Ok(Attachment::Entry(e)));
    }

    #[test]
    fn refuses_what_is_wrong() {
        let good = topic().encode();
        assert_eq!(decode(&good[..TOPIC_LEN - 1]), Err(WireError::Length { len: TOPIC_LEN - 1 }));
        assert_eq!(decode(b""), Err(WireError::Length { len: 0 }));
        let mut b = good;
        b[0] = b'X';
        assert_eq!(decode(&b), Err(WireError::Magic));
        let mut b = good;
        b[2] = 9;
        assert_eq!(decode(&b), Err(WireError::Version(9)));
        let mut b = good;
        b[3] = 4;
        assert_eq!(decode(&b), Err(WireError::Kind(4)));
        let mut b = good;
        b[52] = 3;
        assert_eq!(decode(&b), Err(WireError::Field("delivery policy")));
        let mut b = good;
        b[44..48].fill(0);
        assert!(matches!(decode(&b), Err(WireError::Field(_))));
        let mut b = good;
        b[55] = 1;
        assert!(matches!(decode(&b), Err(WireError::Field(_))));
        let b = batch().encode();
        let mut one = b.clone();
        one[32..36].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(decode(&one), Err(WireError::Field("batch size")));
        let mut huge = b.clone();
        huge[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode(&huge), Err(WireError::Field("batch size")));
        assert_eq!(decode(&b[..b.len() - 1]), Err(WireError::Length { len: b.len() - 1 }));
        let mut zero_seq = b.clone();
        zero_seq[36..44].fill(0);
        assert_eq!(decode(&zero_seq), Err(WireError::Field("sequence number 0")));
        let mut long = good.to_vec();
        long.push(0);
        assert_eq!(decode(&long), Err(WireError::Length { len: TOPIC_LEN + 1 }));
    }

    /// Random and mutated inputs: `decode` never panics and accepts only what re-encodes to
    /// the same bytes.
    #[test]
    fn any_bytes_are_safe() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let seeds = [
            topic().encode().to_vec(),
            EntryMeta { origin: [3; ID_LEN], index: 9, ts_ns: 9, journal: [3; 16] }.encode().to_vec(),
            batch().encode(),
        ];
        for i in 0..200_000 {
            let mut b = seeds[i % 3].clone();
            match next() % 4 {
                0 => {
                    let n = (next() % 80) as usize;
                    b = (0..n).map(|_| next() as u8).collect();
                }
                1 => {
                    let at = (next() as usize) % b.len();
                    b[at] ^= 1 << (next() % 8);
                }
                2 => b.truncate((next() as usize) % (b.len() + 1)),
                _ => b.push(next() as u8),
            }
            match decode(&b) {
                Ok(Attachment::Topic(t)) => assert_eq!(t.encode().as_slice(), b.as_slice()),
                Ok(Attachment::Entry(e)) => assert_eq!(e.encode().as_slice(), b.as_slice()),
                Ok(Attachment::Batch(t)) => assert_eq!(t.encode(), b),
                Err(_) => {}
            }
        }
    }
}
