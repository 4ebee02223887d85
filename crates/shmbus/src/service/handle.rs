//! The service handle, and what a service tells tools about itself.

use std::sync::Arc;

use super::client::Client;
use super::layout::{ServiceConfig, ServiceLayout};
use super::server::Server;
use super::shared::{status_of, unanswered, ServiceStatus, Shared, ROLE_CLIENT, ROLE_SERVER};
use crate::domain::Domain;
use crate::endpoint::channel::Channel;
use crate::error::OpenError;
use crate::sys::ReadOnly;

/// A service, mapped: make its [`Server`]s and [`Client`]s from it.
///
/// Cheap to clone (the mapping is shared); the endpoints keep it alive.
///
/// ```no_run
/// use shmbus::service::{Service, ServiceConfig};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let d = shmbus::Domain::new("robot1")?;
/// let svc = Service::create_or_open(&d, "plan", &ServiceConfig::default())?;
/// let mut server = svc.server()?;
/// let mut client = svc.client()?;
/// let id = client.try_send_request(b"to the dock")?;
/// let req = server.recv()?;
/// req.respond_last(b"path 12")?;
/// let resp = client.recv_response()?;
/// assert_eq!((resp.request_id(), resp.data()), (id, &b"path 12"[..]));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Service {
    shared: Arc<Shared>,
}

impl Service {
    /// Opens the service `name`, creating it with `config` if it does not exist yet.
    ///
    /// A layout value set in `config` that differs from an existing service's fails with
    /// [`OpenError::LayoutMismatch`]; an unset one accepts what exists (see
    /// [`ServiceConfig`]).
    pub fn create_or_open(domain: &Domain, name: &str, config: &ServiceConfig) -> Result<Service, OpenError> {
        Ok(Service { shared: Arc::new(Channel::create_or_open(domain, name, config)?) })
    }

    /// Opens the existing service `name`.
    pub fn open(domain: &Domain, name: &str) -> Result<Service, OpenError> {
        Ok(Service { shared: Arc::new(Channel::open(domain, name)?) })
    }

    /// Reads a service's status without joining it: read permission suffices.
    pub fn status(domain: &Domain, name: &str) -> Result<ServiceStatus, OpenError> {
        Ok(status_of(&Channel::<ServiceLayout, ReadOnly>::open_read_only(domain, name)?))
    }

    /// Joins the service as a server (one of up to `max_servers`, competing for requests).
    /// A full table of servers is [`OpenError::TooManyParticipants`] (the dead are reclaimed
    /// first).
    pub fn server(&self) -> Result<Server, OpenError> {
        Server::attach(self.shared.clone())
    }

    /// Joins the service as a client, taking a lane of `max_in_flight` request slots. A
    /// full table of clients is [`OpenError::TooManyParticipants`] (the dead are reclaimed
    /// first, and what they had in flight is given up).
    pub fn client(&self) -> Result<Client, OpenError> {
        Client::attach(self.shared.clone())
    }

    /// The schema of the service's requests, set by its creator (`None`: it has none).
    pub fn request_schema(&self) -> Option<&crate::Schema> {
        self.shared.schemas().first().map(|s| &**s)
    }

    /// The schema of the service's responses, set by its creator (`None`: it has none).
    pub fn response_schema(&self) -> Option<&crate::Schema> {
        self.shared.schemas().get(1).map(|s| &**s)
    }

    /// Maps every page of this service into this process now (see
    /// [`Topic::prefault`](crate::Topic::prefault)).
    pub fn prefault(&self) {
        self.shared.prefault();
    }

    /// The service's file.
    pub(super) fn path(&self) -> &std::path::Path {
        self.shared.path()
    }

    /// The service's `max_request_len`.
    pub fn max_request_len(&self) -> usize {
        self.shared.layout().max_request
    }

    /// The service's `max_response_len`.
    pub fn max_response_len(&self) -> usize {
        self.shared.layout().max_response
    }

    /// The service's `max_in_flight`: requests one client may have unanswered.
    pub fn max_in_flight(&self) -> usize {
        self.shared.layout().in_flight
    }
}

/// The service in the kind registry (`admin`).
pub(crate) struct ServiceKind;

impl crate::describe::KindInfo for ServiceKind {
    fn kind(&self) -> crate::kind::Kind {
        crate::kind::Kind::Service
    }

    fn role_name(&self, role: u32) -> Option<&'static str> {
        match role {
            ROLE_SERVER => Some("server"),
            ROLE_CLIENT => Some("client"),
            _ => None,
        }
    }

    fn param_keys(&self) -> &'static [&'static str] {
        &["max_servers", "max_clients", "max_in_flight", "max_request_len", "max_response_len", "response_depth"]
    }

    /// Requests posted and not finished by a server.
    fn pending(&self, seg: crate::segment::Segment<ReadOnly>) -> Result<Option<crate::describe::Pending>, OpenError> {
        Ok(Some(crate::describe::Pending::Requests(unanswered(seg)?)))
    }

    fn describe(&self, domain: &Domain, name: &str) -> Result<crate::describe::Description, OpenError> {
        let chan = Channel::<ServiceLayout, ReadOnly>::open_read_only(domain, name)?;
        let st = status_of(&chan);
        Ok(crate::describe::Description {
            max_message_len: Some(st.max_request_len.max(st.max_response_len) as u64),
            senders: Some(st.clients),
            receivers: Some(st.servers),
            status: vec![
                ("max_servers", st.max_servers.into()),
                ("max_clients", st.max_clients.into()),
                ("max_in_flight", st.max_in_flight.into()),
                ("max_request_len", st.max_request_len.into()),
                ("max_response_len", st.max_response_len.into()),
                ("response_depth", st.response_depth.into()),
                ("servers", st.servers.into()),
                ("clients", st.clients.into()),
                ("requests_pending", st.pending.into()),
                ("requests_in_flight", st.in_flight.into()),
                ("requests_abandoned", st.abandoned.into()),
                ("requests", st.requests.into()),
                ("responses", st.responses.into()),
                ("timeouts", st.timeouts.into()),
                ("server_gone", st.server_gone.into()),
                ("failed", st.failed.into()),
            ],
            detail: format!(
                "servers {}/{}, clients {}/{}, {} requests ({} pending, {} in flight), {} responses, {} timeouts",
                st.servers,
                st.max_servers,
                st.clients,
                st.max_clients,
                st.requests,
                st.pending,
                st.in_flight,
                st.responses,
                st.timeouts
            ),
            ..Default::default()
        })
    }
}
