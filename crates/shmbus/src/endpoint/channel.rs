//! The mapped channel every segment kind's handle is made of: the validated segment, its
//! layout and its name, and the one way to create, open and check it.
//!
//! A kind's public handle (`Topic`, `Queue`, `Stream`, `Pool`) is an `Arc` of a
//! [`Channel`] of its layout (plus what is really its own, such as the stream's double
//! mapping); its endpoints keep that `Arc` and build their views of the kind area from
//! [`Channel::kind_base`] and [`Channel::layout`], which are plain field reads.
//!
//! Making a channel is the same for every kind ([`Channel::create_or_open`]): open it if it
//! exists and compare the values the config *sets* with the existing layout (a value left
//! unset accepts what exists); if it does not exist, create it with the config's values and
//! the defaults for the rest. If another process creates it in between with other values for
//! the unset ones, open theirs and compare again. A typed config (one that records a payload
//! type) fails before anything is made if a created channel could not carry the type, and
//! checks the type an existing channel records.
//!
//! A channel opened for status ([`Channel::open_read_only`]) is a `Channel<L, ReadOnly>`: its
//! segment is mapped read-only, and no endpoint can be made from it (endpoints take a
//! read-write `Channel<L>`). It hands out its kind area and participant table only through
//! load-only words ([`Channel::kind_area`], a [`RoArea`]; [`Channel::participant_view`], a
//! [`ParticipantView`]), from which each kind builds the `StatusView` its `status` reads:
//! the words status needs, with `load` and nothing else. A read-write channel gives the same
//! views (an endpoint's `status` reads through them too), and its kind's read-write views
//! (the topic's `Shared`, the queue's `Ring`, the pool's `PoolRef`, the stream's
//! `RingShared`) over [`Channel::kind_base`] and [`Channel::participants`], which only it has.
//! What a status and a read-write path both compute is one function of the loaded values
//! (or generic over [`Load`](crate::sync::Load)), not two copies.

// Under loom only the kinds' protocols are built, not their handles.
#![cfg_attr(loom, allow(dead_code))]

use std::path::Path;
use std::sync::Arc;

use crate::domain::Domain;
use crate::error::OpenError;
use crate::participants::{ParticipantTable, ParticipantView};
use crate::pod::{check_creatable, check_payload, PayloadType};
use crate::schema::Schema;
use crate::segment::{CreateOptions, Layout, Segment};
use crate::sync::RoArea;
use crate::sys::{Access, ReadOnly, ReadWrite};

/// How often [`Channel::create_or_open`] goes round when the channel keeps appearing (made
/// by another process with other values) and disappearing (removed) under it.
const CREATE_OR_OPEN_TRIES: usize = 16;

/// What a kind's layout tells [`Channel`] beyond what the segment layer needs.
pub(crate) trait ChannelLayout: Layout {
    /// The room a payload has in a channel of this layout: its largest length in bytes and
    /// the alignment every payload address has (`usize::MAX`: never lent as a reference, so
    /// any alignment goes). Checked against a payload type by [`Channel::check_type`].
    fn payload_room(&self) -> (usize, usize);

    /// Whether a channel of this kind may store `n` schemas (one at most; a service none or
    /// two). A file with another number is corrupt.
    fn schema_count_ok(n: usize) -> bool {
        n <= 1
    }
}

/// The creation options every kind's config has: mode, group, the payload type of a typed
/// channel and the schema. Held by each config; its public setters fill it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CommonConfig {
    pub(crate) mode: Option<u32>,
    pub(crate) group: Option<u32>,
    pub(crate) payload: Option<PayloadType>,
    pub(crate) schema: Option<Arc<Schema>>,
    /// The schema is the one a typed config implies (its type's `shmbus-pod` layout), not one
    /// the user set: stored when the channel is made, and on open compared only with a
    /// schema the channel has (the payload type is checked anyway).
    pub(crate) schema_implied: bool,
}

impl CommonConfig {
    /// The file options of a created channel (`0o600` and the creator's group unless set).
    pub(crate) fn create_options(&self) -> CreateOptions {
        let defaults = CreateOptions::default();
        CreateOptions { mode: self.mode.unwrap_or(defaults.mode), gid: self.group.or(defaults.gid) }
    }
}

/// The `mode` and `group` setters of a kind's config and its `payload_type` (which its
/// `for_type` uses), filling its `common` field ([`CommonConfig`]); `$kind` names the kind in
/// their docs.
macro_rules! common_setters {
    ($kind:literal) => {
        crate::endpoint::channel::common_setters!($kind, no_schema);

        #[doc = concat!("The schema of a created ", $kind, "'s messages (see [`Schema`](crate::Schema)). An existing ", $kind, " must carry the same one, else opening it fails with [`OpenError::SchemaMismatch`](crate::OpenError::SchemaMismatch); with none set, any is accepted.")]
        pub fn schema(mut self, schema: crate::Schema) -> Self {
            self.common.schema = Some(std::sync::Arc::new(schema));
            self.common.schema_implied = false;
            self
        }

        /// Records `T` as the payload type of a typed channel, and its `shmbus-pod` schema
        /// (if it describes a struct) as the schema of a created one.
        #[cfg_attr(loom, allow(dead_code))]
        pub(crate) fn payload_type<T: crate::Pod>(mut self) -> Self {
            self.common.payload = Some(crate::pod::PayloadType::of::<T>());
            if let Some(s) = crate::schema::pod_schema_of::<T>() {
                self.common.schema = Some(std::sync::Arc::new(s));
                self.common.schema_implied = true;
            }
            self
        }
    };
    // A kind whose schemas are its own (a service's two): mode and group only.
    ($kind:literal, no_schema) => {
        #[doc = concat!("The file mode of a created ", $kind, " (default `0o600`). An existing ", $kind, " keeps its own.")]
        pub fn mode(mut self, mode: u32) -> Self {
            self.common.mode = Some(mode);
            self
        }

        #[doc = concat!("The group (gid) of a created ", $kind, " (default: the creator's). An existing ", $kind, " keeps its own.")]
        pub fn group(mut self, gid: u32) -> Self {
            self.common.group = Some(gid);
            self
        }
    };
}
pub(crate) use common_setters;

/// What [`Channel::create_or_open`] needs of a kind's config.
pub(crate) trait ChannelConfig {
    /// The kind's layout.
    type Layout: ChannelLayout;

    /// The layout a channel created with this config gets: the values set, the defaults for
    /// the others. An invalid value is [`OpenError::InvalidConfig`].
    fn layout_to_create(&self) -> Result<Self::Layout, OpenError>;

    /// The layout values this config sets, next to `existing`'s: `(field, requested,
    /// existing)`, with `requested` `None` for a value left unset (it accepts any).
    fn set_fields(&self, existing: &Self::Layout) -> Vec<(&'static str, Option<u64>, u64)>;

    /// Mode, group and payload type.
    fn common(&self) -> &CommonConfig;

    /// The schemas a created channel stores, and an opened one must carry (none: any).
    fn schemas(&self) -> Vec<Arc<Schema>> {
        self.common().schema.iter().cloned().collect()
    }
}

/// An open channel segment of layout `L`, read-write (the default: the one mapping a handle
/// and its endpoints share) or read-only (for status), as `A` says.
#[derive(Debug)]
pub(crate) struct Channel<L, A: Access = ReadWrite> {
    seg: Segment<A>,
    layout: L,
    name: String,
}

impl<L: ChannelLayout> Channel<L> {
    /// Opens channel `name`, creating it with `config` if it does not exist (see the
    /// [module docs](self)).
    pub(crate) fn create_or_open<C>(domain: &Domain, name: &str, config: &C) -> Result<Channel<L>, OpenError>
    where
        C: ChannelConfig<Layout = L>,
    {
        let layout = config.layout_to_create()?;
        let common = config.common();
        let Some(t) = common.payload else { return Channel::create_or_open_with(domain, name, config, &layout) };
        // A type the created channel could not carry fails before anything is made.
        let (len, align) = layout.payload_room();
        check_creatable(&t, len, align)?;
        let chan = Channel::create_or_open_with(domain, name, config, &layout)?;
        chan.check_type(&t)?;
        Ok(chan)
    }

    fn create_or_open_with<C>(domain: &Domain, name: &str, config: &C, layout: &L) -> Result<Channel<L>, OpenError>
    where
        C: ChannelConfig<Layout = L>,
    {
        let common = config.common();
        let opts = common.create_options();
        for _ in 0..CREATE_OR_OPEN_TRIES {
            match Channel::open(domain, name) {
                Ok(chan) => return chan.checked(config),
                Err(OpenError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            match Segment::create_or_open(domain, name, layout, &opts, common.payload.as_ref(), &config.schemas()) {
                Ok((seg, layout, false)) => return Channel::of(seg, layout, name.to_owned())?.checked(config),
                Ok((seg, layout, _created)) => return Channel::of(seg, layout, name.to_owned()),
                // Created by another process meanwhile with other values for what this config
                // leaves unset: open theirs and compare what is set.
                Err(OpenError::LayoutMismatch { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        // It keeps changing under us: say how it differs now (or that it is gone).
        Channel::open(domain, name)?.checked(config)
    }

    /// `self`, if every value `config` sets matches; else [`OpenError::LayoutMismatch`]
    /// naming the first that does not, or [`OpenError::SchemaMismatch`].
    fn checked<C: ChannelConfig<Layout = L>>(self, config: &C) -> Result<Channel<L>, OpenError> {
        for (field, requested, existing) in config.set_fields(&self.layout) {
            if let Some(requested) = requested.filter(|&r| r != existing) {
                return Err(OpenError::LayoutMismatch { path: self.path().to_owned(), field, existing, requested });
            }
        }
        let found = self.seg.schemas();
        if !(config.common().schema_implied && found.is_empty()) {
            check_schemas(self.path(), found, &config.schemas())?;
        }
        Ok(self)
    }

    /// Opens the existing channel `name` read-write.
    pub(crate) fn open(domain: &Domain, name: &str) -> Result<Channel<L>, OpenError> {
        Channel::open_as(domain, name)
    }

    /// Checks that this channel can carry payload type `t` (see [`check_payload`]).
    pub(crate) fn check_type(&self, t: &PayloadType) -> Result<(), OpenError> {
        let (len, align) = self.layout.payload_room();
        check_payload(self.seg.path(), self.seg.info().payload.as_ref(), t, len, align)
    }
}

impl<L: ChannelLayout> Channel<L, ReadOnly> {
    /// Opens the existing channel `name` read-only (`O_RDONLY`, `PROT_READ`), for status:
    /// read permission suffices, and nothing can be stored through it.
    pub(crate) fn open_read_only(domain: &Domain, name: &str) -> Result<Channel<L, ReadOnly>, OpenError> {
        Channel::open_as(domain, name)
    }
}

impl<L: ChannelLayout, A: Access> Channel<L, A> {
    /// The channel over an open `seg` of layout `layout`: every way to a channel comes
    /// through here, where a file storing a number of schemas its kind never stores is
    /// refused as corrupt.
    fn of(seg: Segment<A>, layout: L, name: String) -> Result<Channel<L, A>, OpenError> {
        let n = seg.schemas().len();
        if !L::schema_count_ok(n) {
            return Err(OpenError::corrupt(
                seg.path(),
                format!("{n} schema records, which a {} never stores", L::KIND),
            ));
        }
        Ok(Channel { seg, layout, name })
    }

    fn open_as(domain: &Domain, name: &str) -> Result<Channel<L, A>, OpenError> {
        let (seg, layout) = Segment::<A>::open::<L>(domain, name)?;
        Channel::of(seg, layout, name.to_owned())
    }

    /// A channel over `seg`, already open (for tools that opened it by path): its kind must
    /// be `L`'s and its layout valid.
    pub(crate) fn from_segment(seg: Segment<A>) -> Result<Channel<L, A>, OpenError> {
        let layout = seg.layout::<L>()?;
        let name = seg.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Channel::of(seg, layout, name)
    }
}

impl<L> Channel<L> {
    /// Maps every page of the channel's file into this process now (`MADV_POPULATE_WRITE`),
    /// so that no send or receive takes a page fault the first time it touches a page. The
    /// file's memory is allocated when the channel is made; what a process lacks is its own
    /// page-table entries, one fault per 4 KiB page on first touch. Advisory: before Linux
    /// 5.14, or over a file cut short, it does nothing.
    pub(crate) fn prefault(&self) {
        self.seg.prefault(usize::MAX);
    }

    /// Start of the kind area, `L::kind_area_size()` bytes long, for loads and stores.
    #[inline]
    pub(crate) fn kind_base(&self) -> *mut u8 {
        self.seg.kind_base()
    }

    /// The participant table, read-write.
    #[inline]
    pub(crate) fn participants(&self) -> ParticipantTable<'_> {
        self.seg.participants()
    }

    /// The counter block of participant entry `index`, reset for this process: what an
    /// endpoint that has just registered there counts in (see [`crate::stats`]).
    pub(crate) fn own_counter(&self, index: usize) -> crate::stats::Counter {
        let c = self.seg.counter(index);
        c.reset(crate::sys::ProcessId::current());
        c
    }
}

impl<L, A: Access> Channel<L, A> {
    /// The validated layout (the opener's own copy: nothing in the file can change it).
    #[inline]
    pub(crate) fn layout(&self) -> &L {
        &self.layout
    }

    /// The segment.
    #[inline]
    pub(crate) fn seg(&self) -> &Segment<A> {
        &self.seg
    }

    /// The kind area through load-only words (see [`Segment::kind_area`]).
    #[inline]
    pub(crate) fn kind_area(&self) -> RoArea<'_> {
        self.seg.kind_area()
    }

    /// The participant table through load-only words (see [`Segment::participant_view`]).
    #[inline]
    pub(crate) fn participant_view(&self) -> ParticipantView<'_> {
        self.seg.participant_view()
    }

    /// Whether the file was truncated under this process (see
    /// [`Segment::was_truncated`]). Slow paths only.
    #[inline]
    pub(crate) fn was_truncated(&self) -> bool {
        self.seg.was_truncated()
    }

    /// The segment file.
    pub(crate) fn path(&self) -> &Path {
        self.seg.path()
    }

    /// The channel's schema (`None`: it has none).
    pub(crate) fn schema(&self) -> Option<&Arc<Schema>> {
        self.seg.schema()
    }

    /// Every schema the channel stores (a service's: its requests', then its responses').
    pub(crate) fn schemas(&self) -> &[Arc<Schema>] {
        self.seg.schemas()
    }

    /// The channel's name in its domain.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

/// [`check_schema`] of a channel's whole list of schemas: any, when `requested` is empty;
/// else exactly those.
pub(crate) fn check_schemas(path: &Path, found: &[Arc<Schema>], requested: &[Arc<Schema>]) -> Result<(), OpenError> {
    if requested.is_empty() || found == requested {
        return Ok(());
    }
    Err(OpenError::SchemaMismatch {
        path: path.to_owned(),
        expected: crate::schema::describe_all(requested),
        found: crate::schema::describe_all(found),
    })
}

/// Whether a channel carrying `found` may be opened by one asking for `requested`: any, when
/// nothing is asked for; else exactly that schema ([`OpenError::SchemaMismatch`] naming both).
pub(crate) fn check_schema(path: &Path, found: Option<&Schema>, requested: Option<&Schema>) -> Result<(), OpenError> {
    match requested {
        Some(r) if found != Some(r) => Err(OpenError::SchemaMismatch {
            path: path.to_owned(),
            expected: r.to_string(),
            found: crate::schema::describe(found),
        }),
        _ => Ok(()),
    }
}
