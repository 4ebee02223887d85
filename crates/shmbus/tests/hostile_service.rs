//! A service under a hostile peer: while two servers and two clients run in their own
//! processes, this process writes extreme and random values (0, 1, max, max-1, random,
//! valid-looking states) into every control word of the segment (the request event, the
//! pending bitmap, the lanes' events, every slot's post and claim words, lengths, ids and
//! ring positions, the participant entries) many thousands of times. Every call of the children must return
//! within its timeout plus a generous slack, none may die by a signal, and their output
//! stays bounded. Once the words are restored, honest parties work again.
//!
//! The test binary re-executes itself as the children (`child_entry`).
#![cfg(not(loom))]

mod common;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use common::hostile::{self, spawn, SharedMap as Mapping};
use common::{child_role, eventually, Rng, Scratch};
use shmbus::segment::{KIND_OFFSET, PARTICIPANTS_OFFSET};
use shmbus::service::{
    CallError, RequestRecvTimeoutError, ResponseRecvTimeoutError, ResponseTryRecvError, Service, ServiceConfig,
};
use shmbus::waitset::Waitable;
use shmbus::{Domain, WaitSet};

const SERVERS: usize = 2;
const CLIENTS: usize = 2;
const IN_FLIGHT: usize = 2;
const MAX_LEN: usize = 64;
const DEPTH: usize = 2;
fn cfg() -> ServiceConfig {
    ServiceConfig::default()
        .max_servers(SERVERS)
        .max_clients(CLIENTS)
        .max_in_flight(IN_FLIGHT)
        .max_request_len(MAX_LEN)
        .max_response_len(MAX_LEN)
        .response_depth(DEPTH)
}
/// Each call's timeout, and the slack a call may take beyond it before it counts as hung.
const TIMEOUT: Duration = Duration::from_millis(20);
const SLACK: Duration = Duration::from_secs(3);
/// How long the scribbling lasts.
const SCRIBBLE: Duration = Duration::from_secs(3);
/// Most bytes a child may print (it prints one summary line, or one line on failure).
const OUTPUT_LIMIT: usize = 16 * 1024;

fn domain_at(root: &Path) -> Domain {
    Domain::with_root("h", root).unwrap()
}

/// `(file offset, width)` of every control word of the service (see service/protocol.rs and
/// service/layout.rs for the layout).
fn control_words() -> Vec<(usize, usize)> {
    let k = KIND_OFFSET;
    // The request event, the pending bitmap's word.
    let mut w = vec![(k, 4), (k + 256, 8)];
    let slot_stride = 256 + MAX_LEN.div_ceil(64) * 64 + DEPTH * MAX_LEN.div_ceil(64) * 64;
    let lane_stride = 128 + IN_FLIGHT * slot_stride;
    for lane in 0..CLIENTS {
        // The lane's events and counters.
        let l = k + 320 + lane * lane_stride;
        w.extend([(l, 4), (l + 4, 4), (l + 64, 8), (l + 72, 8)]);
        for slot in 0..IN_FLIGHT {
            // Post word, request length, request id, ring tail; the answer line's DONE copy
            // and inline length; ring head, cell lengths; the claim word.
            let s = l + 128 + slot * slot_stride;
            w.extend([(s, 8), (s, 8), (s + 192, 8), (s + 192, 8), (s + 8, 8), (s + 16, 8), (s + 24, 8)]);
            w.extend([(s + 112, 8), (s + 120, 8), (s + 112, 8), (s + 128, 8)]);
            w.extend((0..DEPTH).map(|c| (s + 136 + c * 8, 8)));
        }
    }
    // Participant entries: owner word, start time, role.
    for e in 0..SERVERS + CLIENTS {
        let entry = PARTICIPANTS_OFFSET + e * 64;
        w.extend([(entry, 8), (entry + 8, 8), (entry + 16, 4)]);
    }
    w
}

/// A hostile value for a word of `width` bytes.
fn hostile_value(rng: &mut Rng, width: usize) -> u64 {
    let max = if width == 8 { u64::MAX } else { u32::MAX as u64 };
    match rng.below(8) {
        0 => 0,
        1 => 1,
        2 => max,
        3 => max - 1,
        // A valid-looking slot state (any tag, a small request number, some taker) or count.
        4 => rng.below(6) | rng.below(4) << 33 | rng.below(4) << 4,
        5 => rng.below(8),
        6 => rng.below(1 << (CLIENTS * IN_FLIGHT)),
        _ => rng.next() & max,
    }
}

fn timed<T>(what: &str, timeout: Duration, f: impl FnOnce() -> T) -> T {
    hostile::timed(what, timeout, SLACK, f)
}

fn finish(child: Child, role: &str) -> String {
    hostile::finish(child, role, OUTPUT_LIMIT)
}

#[test]
fn child_entry() {
    let Some(role) = child_role() else {
        return;
    };
    let root = PathBuf::from(std::env::var("SHMBUS_ROOT").unwrap());
    let stop = root.join("stop");
    let d = domain_at(&root);
    let svc = Service::open(&d, "s").unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    let (mut ok, mut empty, mut corrupt, mut other) = (0u64, 0u64, 0u64, 0u64);
    let mut ws = WaitSet::new();
    let mut i = 0u64;
    match role.as_str() {
        "server" => {
            let mut server = svc.server().unwrap();
            while !stop.exists() && Instant::now() < end {
                i += 1;
                match timed("recv_timeout", TIMEOUT, || server.recv_timeout(TIMEOUT)) {
                    Ok(mut req) => {
                        assert!(req.len() <= MAX_LEN, "a request of {} bytes", req.len());
                        ok += 1;
                        let a = req.data().to_vec();
                        let r = match i % 4 {
                            0 => timed("respond_timeout", TIMEOUT, || req.respond_timeout(&a, true, TIMEOUT)),
                            1 => timed("try_respond", Duration::ZERO, || req.try_respond(&a, false)),
                            2 => timed("loan", TIMEOUT, || {
                                req.loan_with(shmbus::Wait::For(TIMEOUT)).map(|mut l| {
                                    l[..a.len()].copy_from_slice(&a);
                                    l.send(a.len())
                                })
                            }),
                            _ => Ok(()),
                        };
                        if r.is_err() {
                            other += 1;
                        }
                        timed("end", Duration::ZERO, || req.end());
                    }
                    Err(RequestRecvTimeoutError::Timeout) => empty += 1,
                    Err(RequestRecvTimeoutError::Corrupt(_)) => corrupt += 1,
                    Err(e) => panic!("unexpected error {e}"),
                }
                let _ = timed("is_ready", Duration::ZERO, || server.is_ready());
                let _ = timed("recheck", Duration::ZERO, || server.recheck());
                if i % 8 == 0 {
                    let _ = timed("WaitSet::wait", TIMEOUT, || ws.wait_timeout(&[&server], TIMEOUT).map(|r| r.len()));
                }
            }
            timed("drop", Duration::ZERO, || drop(server));
        }
        "client" => {
            let mut client = svc.client().unwrap();
            while !stop.exists() && Instant::now() < end {
                i += 1;
                let req = i.to_le_bytes();
                if i % 3 == 0 {
                    match timed("call", TIMEOUT, || client.call(&req, TIMEOUT)) {
                        Ok(r) => {
                            assert!(r.len() <= MAX_LEN);
                            ok += 1
                        }
                        Err(CallError::Timeout) => empty += 1,
                        Err(CallError::Recv(ref e)) if matches!(e, shmbus::service::ResponseRecvError::Corrupt(_)) => {
                            corrupt += 1
                        }
                        Err(_) => other += 1,
                    }
                } else {
                    let _ = timed("try_send_request", Duration::ZERO, || client.try_send_request(&req));
                    match timed("recv_response_timeout", TIMEOUT, || client.recv_response_timeout(TIMEOUT)) {
                        Ok(r) => {
                            assert!(r.data().len() <= MAX_LEN);
                            ok += 1
                        }
                        Err(ResponseRecvTimeoutError::Timeout | ResponseRecvTimeoutError::NoneInFlight) => empty += 1,
                        Err(ResponseRecvTimeoutError::Corrupt(_)) => corrupt += 1,
                        Err(ResponseRecvTimeoutError::ServerGone { .. }) => other += 1,
                        Err(e) => panic!("unexpected error {e}"),
                    }
                }
                match timed("try_recv_response_ref", Duration::ZERO, || client.try_recv_response_ref().map(|r| r.len()))
                {
                    Ok(n) => assert!(n <= MAX_LEN),
                    Err(ResponseTryRecvError::Truncated) => {
                        panic!("reported truncated, but nothing truncated the file")
                    }
                    Err(_) => {}
                }
                let _ = timed("is_ready", Duration::ZERO, || client.is_ready());
                let _ = timed("recheck", Duration::ZERO, || client.recheck());
                if i % 8 == 0 {
                    let _ = timed("WaitSet::wait", TIMEOUT, || ws.wait_timeout(&[&client], TIMEOUT).map(|r| r.len()));
                }
                assert!(client.in_flight() <= IN_FLIGHT);
            }
            timed("drop", Duration::ZERO, || drop(client));
        }
        other => panic!("unknown child role {other}"),
    }
    println!("{role}: ok {ok}, empty {empty}, corrupt {corrupt}, refused/gone {other}");
}

#[test]
fn a_hostile_peer_never_hangs_kills_or_floods_servers_or_clients() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("hostile-service").kept_on_failure();
    let d = domain_at(s.path());
    drop(Service::create_or_open(&d, "s", &cfg()).unwrap());
    let path = d.channel_path("s").unwrap();
    let servers: Vec<Child> = (0..SERVERS).map(|_| spawn("server", s.path())).collect();
    eventually("servers joined", 20, || Service::status(&d, "s").unwrap().servers == SERVERS);
    let clients: Vec<Child> = (0..CLIENTS).map(|_| spawn("client", s.path())).collect();
    eventually("clients joined", 20, || Service::status(&d, "s").unwrap().clients == CLIENTS);
    let map = Mapping::new(&path);
    let mut rng = Rng::from_var_or_clock("SHMBUS_HOSTILE_SEED");
    let words = control_words();
    let writes = hostile::scribble(&map, &words, &mut rng, Instant::now() + SCRIBBLE, hostile_value);
    std::fs::write(s.path().join("stop"), b"").unwrap();
    assert!(writes >= 10_000, "only {writes} hostile writes");
    let mut summary = Vec::new();
    for c in clients {
        summary.push(finish(c, "client"));
    }
    for c in servers {
        summary.push(finish(c, "server"));
    }
    eprintln!("{writes} hostile writes");
    for line in summary.iter().flat_map(|s| s.lines()).filter(|l| l.contains(": ok ")) {
        eprintln!("{line}");
    }

    // Restored (all zero is a fresh service), it works for honest parties again.
    map.zero(PARTICIPANTS_OFFSET, KIND_OFFSET - PARTICIPANTS_OFFSET);
    map.zero(KIND_OFFSET, map.len() - KIND_OFFSET);
    let svc = Service::open(&d, "s").unwrap();
    let mut server = svc.server().unwrap();
    let mut client = svc.client().unwrap();
    for i in 0..50u64 {
        let id = client.try_send_request(&i.to_le_bytes()).unwrap();
        let req = server.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!((req.id(), req.data()), (id, &i.to_le_bytes()[..]));
        let a = req.data().to_vec();
        req.respond_last(&a).unwrap();
        assert_eq!(client.recv_response_timeout(Duration::from_secs(5)).unwrap().data(), i.to_le_bytes());
    }
}

#[test]
fn a_client_never_reads_an_earlier_clients_answer_left_in_its_slot() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("hostile-service-fin");
    let d = domain_at(s.path());
    let svc = Service::create_or_open(&d, "s", &cfg().max_clients(1)).unwrap();
    let map = Mapping::new(&d.channel_path("s").unwrap());
    let mut server = svc.server().unwrap();
    let t = std::thread::spawn(move || {
        for _ in 0..3 {
            let req = server.recv_timeout(Duration::from_secs(20)).unwrap();
            let answer: Vec<u8> = req.data().iter().rev().copied().collect();
            req.respond_last(&answer).unwrap();
        }
    });
    let long = Duration::from_secs(20);
    let mut a = svc.client().unwrap();
    assert_eq!(a.call(b"first", long).unwrap(), b"tsrif");
    drop(a);
    // The next client of the lane numbers on from the lane's requests.
    let mut b = svc.client().unwrap();
    assert_eq!(b.call(b"second", long).unwrap(), b"dnoces");
    drop(b);
    // Even made to reuse the second client's number (the lane's count of requests set back
    // to 1), a client does not take the answer still in the slot's answer line for its own.
    let requests = KIND_OFFSET + 320 + 64;
    map.store(requests, 8, 1);
    let mut c = svc.client().unwrap();
    assert_eq!(c.call(b"third", long).unwrap(), b"driht");
    t.join().unwrap();
}
