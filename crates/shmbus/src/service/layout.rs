//! The service's configuration and its validated segment layout.

use std::sync::Arc;

use super::protocol::{HEADER_SIZE, LANE_HEAD, MAX_DEPTH, SLOT_HEAD};
use crate::error::OpenError;
use crate::participants::PARTICIPANTS;
use crate::schema::Schema;

/// Largest request or response a service accepts (64 MiB).
pub const MAX_MESSAGE_LEN: usize = 64 << 20;
/// Most requests one client may have in flight.
pub const MAX_IN_FLIGHT: usize = 64;
/// Most request slots a service has in all (`max_clients * max_in_flight`).
pub const MAX_SLOTS: usize = 4096;
/// Largest kind area a service may need (1 TiB): a bound on untrusted headers.
const MAX_AREA: u64 = 1 << 40;

/// How to make a service: its layout, fixed at creation, and the file's mode and group.
///
/// Built with named setters from the default:
/// `ServiceConfig::default().max_clients(8).max_response_len(6_220_800)`. A setter that is
/// not called accepts whatever an existing service has; a set value that differs from the
/// existing service fails with [`OpenError::LayoutMismatch`]; a service that is created uses
/// the defaults for the unset values.
///
/// The memory a service takes is about
/// `max_clients * max_in_flight * (max_request_len + response_depth * max_response_len)`:
/// every request slot has its request's room and its own ring of `response_depth` responses,
/// so that a response is written once, in place, and read in place (loans).
///
/// [`OpenError::LayoutMismatch`]: crate::OpenError::LayoutMismatch
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ServiceConfig {
    max_servers: Option<usize>,
    max_clients: Option<usize>,
    max_in_flight: Option<usize>,
    max_request_len: Option<usize>,
    max_response_len: Option<usize>,
    response_depth: Option<usize>,
    request_schema: Option<Arc<Schema>>,
    response_schema: Option<Arc<Schema>>,
    common: crate::endpoint::channel::CommonConfig,
}

impl ServiceConfig {
    /// The default of [`max_servers`](Self::max_servers).
    pub const DEFAULT_MAX_SERVERS: usize = 4;
    /// The default of [`max_clients`](Self::max_clients).
    pub const DEFAULT_MAX_CLIENTS: usize = 16;
    /// The default of [`max_in_flight`](Self::max_in_flight).
    pub const DEFAULT_MAX_IN_FLIGHT: usize = 4;
    /// The default of [`max_request_len`](Self::max_request_len) and
    /// [`max_response_len`](Self::max_response_len).
    pub const DEFAULT_MAX_LEN: usize = 4096;
    /// The default of [`response_depth`](Self::response_depth).
    pub const DEFAULT_RESPONSE_DEPTH: usize = 2;

    /// Most servers attached at once (default 4). `max_servers + max_clients` is at most 128.
    pub fn max_servers(mut self, n: usize) -> Self {
        self.max_servers = Some(n);
        self
    }

    /// Most clients attached at once (default 16).
    pub fn max_clients(mut self, n: usize) -> Self {
        self.max_clients = Some(n);
        self
    }

    /// Most requests one client has in flight, 1..=[`MAX_IN_FLIGHT`] (default 4): a client
    /// with this many unanswered requests gets its next one handed back
    /// ([`ServiceTrySendError::Full`](super::ServiceTrySendError::Full)).
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = Some(n);
        self
    }

    /// Largest request in bytes, 1..=[`MAX_MESSAGE_LEN`] (default 4096).
    pub fn max_request_len(mut self, len: usize) -> Self {
        self.max_request_len = Some(len);
        self
    }

    /// Largest response in bytes, 1..=[`MAX_MESSAGE_LEN`] (default 4096).
    pub fn max_response_len(mut self, len: usize) -> Self {
        self.max_response_len = Some(len);
        self
    }

    /// Responses to one request that may wait unread, 1..=4 (default 2): a server streaming
    /// faster than its client reads waits (within its own timeout) for room.
    pub fn response_depth(mut self, n: usize) -> Self {
        self.response_depth = Some(n);
        self
    }

    /// The schema of a created service's requests (see [`Schema`]), with
    /// [`response_schema`](Self::response_schema): a service stores both or neither. An
    /// existing service must carry the same pair, else opening it fails with
    /// [`OpenError::SchemaMismatch`]; with none set, any is accepted.
    pub fn request_schema(mut self, schema: Schema) -> Self {
        self.request_schema = Some(Arc::new(schema));
        self.common.schema_implied = false;
        self
    }

    /// The schema of a created service's responses (see
    /// [`request_schema`](Self::request_schema)).
    pub fn response_schema(mut self, schema: Schema) -> Self {
        self.response_schema = Some(Arc::new(schema));
        self.common.schema_implied = false;
        self
    }

    /// The `shmbus-pod` schemas of `Req` and `Resp` as the pair a typed config implies (none
    /// when either type describes no struct).
    pub(super) fn implied_schemas<Req: crate::Pod, Resp: crate::Pod>(mut self) -> Self {
        if let (Some(req), Some(resp)) = (crate::schema::pod_schema_of::<Req>(), crate::schema::pod_schema_of::<Resp>())
        {
            self.request_schema = Some(Arc::new(req));
            self.response_schema = Some(Arc::new(resp));
            self.common.schema_implied = true;
        }
        self
    }

    crate::endpoint::channel::common_setters!("service", no_schema);
}

/// The layout parameters of a service segment, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServiceLayout {
    pub(crate) max_servers: usize,
    pub(crate) max_clients: usize,
    pub(crate) in_flight: usize,
    pub(crate) max_request: usize,
    pub(crate) max_response: usize,
    pub(crate) depth: usize,
    /// Offsets derived from the above once, in `new` (a call computes slot offsets often).
    at: Strides,
}

/// The offsets of a service's lanes and slots, derived from its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Strides {
    lanes: usize,
    lane: usize,
    slot: usize,
    /// `ceil(2^64 / in_flight)` (0 when `in_flight` is 1), to split a slot index without a
    /// division.
    per_lane: u64,
}

fn round64(n: usize) -> usize {
    n.div_ceil(64) * 64
}

impl ServiceLayout {
    /// Validates (untrusted) parameters.
    pub(crate) fn new(p: [u64; 6]) -> Result<ServiceLayout, String> {
        let [servers, clients, in_flight, request, response, depth] = p;
        let check = |name: &str, v: u64, max: usize| {
            if v == 0 || v > max as u64 {
                Err(format!("{name} is {v}, must be 1..={max}"))
            } else {
                Ok(v as usize)
            }
        };
        let mut l = ServiceLayout {
            max_servers: check("max_servers", servers, PARTICIPANTS - 1)?,
            max_clients: check("max_clients", clients, PARTICIPANTS - 1)?,
            in_flight: check("max_in_flight", in_flight, MAX_IN_FLIGHT)?,
            max_request: check("max_request_len", request, MAX_MESSAGE_LEN)?,
            max_response: check("max_response_len", response, MAX_MESSAGE_LEN)?,
            depth: check("response_depth", depth, MAX_DEPTH)?,
            at: Strides::default(),
        };
        if l.max_servers + l.max_clients > PARTICIPANTS {
            return Err(format!(
                "max_servers + max_clients is {}, must be at most {PARTICIPANTS}",
                l.max_servers + l.max_clients
            ));
        }
        if l.slots() > MAX_SLOTS {
            return Err(format!("max_clients * max_in_flight is {}, must be at most {MAX_SLOTS}", l.slots()));
        }
        // Bounded by the checks above: none of these overflows.
        let slot = SLOT_HEAD + round64(l.max_request) + l.depth * l.cell_stride();
        let per_lane = if l.in_flight == 1 { 0 } else { u64::MAX / l.in_flight as u64 + 1 };
        l.at = Strides {
            lanes: HEADER_SIZE + round64(l.bitmap_words() * 8),
            lane: LANE_HEAD + l.in_flight * slot,
            slot,
            per_lane,
        };
        let area =
            (l.lanes_offset() as u64).saturating_add((l.lane_stride() as u64).saturating_mul(l.max_clients as u64));
        if area > MAX_AREA {
            return Err(format!("the service would need {area} bytes of memory, more than {MAX_AREA}"));
        }
        Ok(l)
    }

    /// Request slots in all: `max_clients * max_in_flight`.
    pub(crate) fn slots(&self) -> usize {
        self.max_clients * self.in_flight
    }

    /// Words of the pending-request bitmap.
    pub(crate) fn bitmap_words(&self) -> usize {
        self.slots().div_ceil(64)
    }

    /// Where the first lane starts in the kind area.
    pub(crate) fn lanes_offset(&self) -> usize {
        self.at.lanes
    }

    /// Bytes of one response cell.
    pub(crate) fn cell_stride(&self) -> usize {
        round64(self.max_response)
    }

    /// Bytes of one request slot: its head, the request's room and its response cells.
    pub(crate) fn slot_stride(&self) -> usize {
        self.at.slot
    }

    /// Bytes of one client's lane: its head and its request slots.
    pub(crate) fn lane_stride(&self) -> usize {
        self.at.lane
    }

    /// Offset of slot `slot` of lane `lane` in the kind area.
    pub(crate) fn slot_offset(&self, lane: usize, slot: usize) -> usize {
        assert!(lane < self.max_clients && slot < self.in_flight);
        self.lanes_offset() + lane * self.lane_stride() + LANE_HEAD + slot * self.slot_stride()
    }

    /// Request slot `index` (lane-major: `lane * max_in_flight + slot`, below MAX_SLOTS) as
    /// its `(lane, slot)`: the quotient by multiplying with the reciprocal (exact for any
    /// 32-bit index), as it runs on every claim.
    pub(crate) fn lane_slot(&self, index: usize) -> (usize, usize) {
        let lane = match self.at.per_lane {
            0 => index,
            m => ((m as u128 * index as u32 as u128) >> 64) as usize,
        };
        (lane, index - lane * self.in_flight)
    }

    /// Offset of lane `lane`'s head.
    pub(crate) fn lane_offset(&self, lane: usize) -> usize {
        assert!(lane < self.max_clients);
        self.lanes_offset() + lane * self.lane_stride()
    }

    /// The participant entry of lane `lane`'s client (servers take entries `0..max_servers`).
    pub(crate) fn client_entry(&self, lane: usize) -> usize {
        self.max_servers + lane
    }
}

impl crate::segment::Layout for ServiceLayout {
    const KIND: crate::kind::Kind = crate::kind::Kind::Service;

    fn from_params(params: &[u64; crate::segment::PARAMS]) -> Result<Self, String> {
        if let Some((i, v)) = params.iter().enumerate().skip(6).find(|(_, v)| **v != 0) {
            return Err(format!("service header parameter {i} is {v}, expected 0"));
        }
        ServiceLayout::new([params[0], params[1], params[2], params[3], params[4], params[5]])
    }

    fn params(&self) -> [u64; crate::segment::PARAMS] {
        [
            self.max_servers as u64,
            self.max_clients as u64,
            self.in_flight as u64,
            self.max_request as u64,
            self.max_response as u64,
            self.depth as u64,
            0,
            0,
        ]
    }

    fn kind_area_size(&self) -> u64 {
        (self.lanes_offset() + self.max_clients * self.lane_stride()) as u64
    }

    fn param_names() -> [&'static str; crate::segment::PARAMS] {
        ["max_servers", "max_clients", "max_in_flight", "max_request_len", "max_response_len", "response_depth", "", ""]
    }

    unsafe fn init(&self, _base: *mut u8) {
        // All-zero is the initial state: every slot FREE, no request pending.
    }
}

impl crate::endpoint::channel::ChannelConfig for ServiceConfig {
    type Layout = ServiceLayout;

    fn layout_to_create(&self) -> Result<ServiceLayout, OpenError> {
        if self.request_schema.is_some() != self.response_schema.is_some() {
            return Err(OpenError::InvalidConfig {
                what: "a service stores its request and response schemas together: set both request_schema and response_schema, or neither".into(),
            });
        }
        let len = |v: Option<usize>| v.unwrap_or(Self::DEFAULT_MAX_LEN) as u64;
        ServiceLayout::new([
            self.max_servers.unwrap_or(Self::DEFAULT_MAX_SERVERS) as u64,
            self.max_clients.unwrap_or(Self::DEFAULT_MAX_CLIENTS) as u64,
            self.max_in_flight.unwrap_or(Self::DEFAULT_MAX_IN_FLIGHT) as u64,
            len(self.max_request_len),
            len(self.max_response_len),
            self.response_depth.unwrap_or(Self::DEFAULT_RESPONSE_DEPTH) as u64,
        ])
        .map_err(|what| OpenError::InvalidConfig { what })
    }

    fn set_fields(&self, existing: &ServiceLayout) -> Vec<(&'static str, Option<u64>, u64)> {
        let set = |v: Option<usize>| v.map(|v| v as u64);
        vec![
            ("max_servers", set(self.max_servers), existing.max_servers as u64),
            ("max_clients", set(self.max_clients), existing.max_clients as u64),
            ("max_in_flight", set(self.max_in_flight), existing.in_flight as u64),
            ("max_request_len", set(self.max_request_len), existing.max_request as u64),
            ("max_response_len", set(self.max_response_len), existing.max_response as u64),
            ("response_depth", set(self.response_depth), existing.depth as u64),
        ]
    }

    fn common(&self) -> &crate::endpoint::channel::CommonConfig {
        &self.common
    }

    /// The request schema, then the response schema (both or neither).
    fn schemas(&self) -> Vec<Arc<Schema>> {
        self.request_schema.iter().chain(&self.response_schema).cloned().collect()
    }
}

/// Requests and responses start 64-byte aligned.
impl crate::endpoint::channel::ChannelLayout for ServiceLayout {
    fn payload_room(&self) -> (usize, usize) {
        (self.max_request.max(self.max_response), 64)
    }

    /// A service stores its request and response schemas together, or none.
    fn schema_count_ok(n: usize) -> bool {
        n == 0 || n == 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_parameters_are_refused_with_their_name() {
        let ok = [4, 16, 4, 4096, 4096, 2];
        assert!(ServiceLayout::new(ok).is_ok());
        for (i, bad, word) in [
            (0, 0, "max_servers"),
            (1, 1000, "max_clients"),
            (2, 65, "max_in_flight"),
            (3, u64::MAX, "max_request_len"),
            (5, 5, "response_depth"),
        ] {
            let mut p = ok;
            p[i] = bad;
            let e = ServiceLayout::new(p).unwrap_err();
            assert!(e.contains(word), "{e}");
        }
        assert!(ServiceLayout::new([64, 65, 1, 1, 1, 1]).unwrap_err().contains("max_servers + max_clients"));
        assert!(ServiceLayout::new([1, 100, 64, 1, 1, 1]).unwrap_err().contains("max_in_flight"));
        let huge = ServiceLayout::new([1, 100, 40, MAX_MESSAGE_LEN as u64, MAX_MESSAGE_LEN as u64, 4]).unwrap_err();
        assert!(huge.contains("bytes of memory"), "{huge}");
    }

    #[test]
    fn a_slot_index_splits_into_its_lane_and_slot_for_every_width() {
        for in_flight in 1..=MAX_IN_FLIGHT {
            let clients = (MAX_SLOTS / in_flight).min(PARTICIPANTS - 1);
            let l = ServiceLayout::new([1, clients as u64, in_flight as u64, 8, 8, 1]).unwrap();
            for index in 0..l.slots() {
                assert_eq!(l.lane_slot(index), (index / in_flight, index % in_flight), "in_flight {in_flight}");
            }
        }
    }

    #[test]
    fn slots_are_64_byte_aligned_and_inside_the_area() {
        let l = ServiceLayout::new([2, 3, 5, 100, 6_220_800, 2]).unwrap();
        use crate::segment::Layout;
        for lane in 0..3 {
            for slot in 0..5 {
                let off = l.slot_offset(lane, slot);
                assert_eq!(off % 64, 0);
                assert!((off + l.slot_stride()) as u64 <= l.kind_area_size());
            }
        }
    }
}
