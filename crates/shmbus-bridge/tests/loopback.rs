//! Bridges on loopback, in this process: two "hosts" are two roots, each with its own
//! bridge and Zenoh session. Topics cross both ways exactly once, in order when lossless; a
//! missing topic is created with the sender's parameters; hostile samples are counted and
//! dropped while good ones still pass; a journal is mirrored entry for entry and resumes;
//! an encrypted one is opened by the serving bridge and sealed again by the mirror.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{free_port, session, wait_until, Scratch};
use shmbus::journal::{EntryCipher, Keyring, XChaCha20Poly1305Cipher};
use shmbus::{
    DeliveryPolicy, Domain, Journal, JournalConfig, JournalTryRecvError, Topic, TopicConfig, TopicTryRecvError,
};
use shmbus_bridge::wire::{BatchItem, EntryMeta, TopicBatch, TopicMeta};
use shmbus_bridge::{Allow, Bridge, Options};
use zenoh::Wait;

const LONG: Duration = Duration::from_secs(20);

fn options(root: &std::path::Path, topics: &str) -> Options {
    let mut o = Options::new(Domain::with_root("d", root).unwrap());
    o.topics = Allow::parse(topics).unwrap();
    o.scan_interval = Duration::from_millis(20);
    o
}

/// Publishes `probe` on `topic` until `seen` says the other side has it; returns how many
/// it sent.
fn until_linked(p: &mut shmbus::Publisher, mut seen: impl FnMut() -> bool) -> u64 {
    let mut sent = 0;
    wait_until(LONG, "the bridges to link", || {
        p.send(b"probe").unwrap();
        sent += 1;
        std::thread::sleep(Duration::from_millis(20));
        seen()
    });
    sent
}

#[test]
fn topics_cross_both_ways_once_in_order() {
    let s = Scratch::new("both");
    let (ra, rb) = (s.dir("a"), s.dir("b"));
    let port = free_port();
    let a = Bridge::start(session(Some(port), &[]), options(&ra, "cam/*,imu")).unwrap();
    let b = Bridge::start(session(None, &[port]), options(&rb, "cam/*,imu")).unwrap();
    let (da, db) = (Domain::with_root("d", &ra).unwrap(), Domain::with_root("d", &rb).unwrap());

    // A lossless topic on both hosts: a reliable subscriber on B gets every message of A's.
    let config = TopicConfig::default().max_message_len(64).history(8).policy(DeliveryPolicy::Block);
    let imu_a = Topic::create_or_open(&da, "imu", &config).unwrap();
    let imu_b = Topic::create_or_open(&db, "imu", &config).unwrap();
    let sub = imu_b.reliable_subscriber().unwrap();
    let mut p = imu_a.publisher().unwrap();
    let mut probes = 0u64;
    let probes_sent = until_linked(&mut p, || loop {
        match sub.try_recv() {
            Ok(m) => {
                assert_eq!(m.data(), b"probe");
                probes += 1;
            }
            Err(TopicTryRecvError::Empty) => return probes > 0,
            Err(e) => panic!("{e}"),
        }
    });
    const N: usize = 5000;
    let reader = std::thread::spawn(move || {
        let mut got = Vec::with_capacity(N);
        while got.len() < N {
            let m = sub.recv_timeout(LONG).unwrap();
            if m.data() != b"probe" {
                got.push(String::from_utf8(m.into_data()).unwrap());
            }
        }
        got
    });
    for i in 0..N {
        p.send(format!("m{i}").as_bytes()).unwrap();
    }
    let got = reader.join().unwrap();
    assert_eq!(got, (0..N).map(|i| format!("m{i}")).collect::<Vec<_>>());

    // The other way, into a topic A does not have: made with B's parameters.
    let cam_b =
        Topic::create_or_open(&db, "cam.front", &TopicConfig::default().max_message_len(1000).history(3)).unwrap();
    let mut pb = cam_b.publisher().unwrap();
    let mut frames = 0u64;
    wait_until(LONG, "cam.front on A", || {
        pb.send(b"frame").unwrap();
        frames += 1;
        std::thread::sleep(Duration::from_millis(20));
        Topic::status(&da, "cam.front").is_ok()
    });
    let st = Topic::status(&da, "cam.front").unwrap();
    assert_eq!((st.max_message_len, st.history, st.policy), (1000, 3, DeliveryPolicy::Overwrite));

    // Not allowed on either side: never crosses.
    let other = Topic::create_or_open(&da, "other", &TopicConfig::default()).unwrap();
    other.publisher().unwrap().send(b"x").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(Topic::status(&db, "other").is_err());

    let (sa, sb) = (a.stop(), b.stop());
    // Every imu message crossed once; what A forwarded is imu only (no cam.front echo), and
    // what B forwarded is cam.front only (no imu echo).
    assert!(sa.forwarded >= N as u64 + probes && sa.forwarded <= N as u64 + probes_sent, "{sa:?}");
    assert!(sb.received >= N as u64 + probes && sb.received <= sa.forwarded, "{sb:?}");
    assert!(sb.forwarded <= frames && sa.received <= sb.forwarded && sa.received >= 1, "{sa:?} {sb:?}");
    assert!(sb.echoes_skipped >= N as u64, "B saw its own publishes and did not send them back: {sb:?}");
    assert!(sa.echoes_skipped <= sa.received, "{sa:?}");
    for s in [&sa, &sb] {
        assert_eq!(
            (s.bad_attachment, s.not_allowed, s.too_large, s.open_failed, s.send_failed),
            (0, 0, 0, 0, 0),
            "{s:?}"
        );
    }
}

fn topic_meta(max: u32, history: u32) -> TopicMeta {
    TopicMeta { origin: [9; 16], seq: 1, ts_mono_ns: 1, ts_real_ns: 1, max_message_len: max, history, policy: 0 }
}

#[test]
fn hostile_samples_are_counted_and_dropped() {
    let s = Scratch::new("bad");
    let root = s.dir("b");
    let port = free_port();
    let b = Bridge::start(session(Some(port), &[]), options(&root, "imu,cam*")).unwrap();
    let d = Domain::with_root("d", &root).unwrap();
    let imu = Topic::create_or_open(&d, "imu", &TopicConfig::default().max_message_len(64).history(4)).unwrap();
    let sub = imu.subscriber().unwrap();
    let evil = session(None, &[port]);
    let put = |key: &str, payload: &[u8], att: Option<Vec<u8>>| {
        let mut b = evil.put(key, payload.to_vec());
        if let Some(a) = att {
            b = b.attachment(a);
        }
        b.wait().unwrap();
    };
    let good = topic_meta(64, 4).encode().to_vec();
    // Until B's subscriber is matched, puts are lost: probe with good ones.
    wait_until(LONG, "the evil peer to reach the bridge", || {
        put("shmbus/d/imu", b"hello", Some(good.clone()));
        std::thread::sleep(Duration::from_millis(20));
        sub.try_recv().is_ok()
    });
    while sub.try_recv().is_ok() {}
    let base = b.stats();

    let mut wrong_version = good.clone();
    wrong_version[2] = 77;
    let entry = EntryMeta { origin: [1; 16], index: 0, ts_ns: 0, journal: [1; 16] }.encode().to_vec();
    let item = |seq, len| BatchItem { seq, ts_mono_ns: 1, ts_real_ns: 1, len };
    let batch = |items| TopicBatch { origin: [9; 16], max_message_len: 64, history: 4, policy: 0, items }.encode();
    let short_batch = batch(vec![item(1, 3), item(2, 3)]);
    for _ in 0..50 {
        put("shmbus/d/imu", b"x", None); // no attachment
        put("shmbus/d/imu", b"x", Some(b"garbage".to_vec()));
        put("shmbus/d/imu", b"x", Some(wrong_version.clone()));
        put("shmbus/d/imu", b"x", Some(entry.clone())); // a journal record on a topic key
        put("shmbus/d/secret", b"x", Some(good.clone())); // outside the allowlist
        put("shmbus/d/imu", &[0u8; 100], Some(good.clone())); // larger than imu's slots
        put("shmbus/d/imu", b"12345", Some(short_batch.clone())); // lengths say 6 bytes, 5 sent
                                                                  // A topic that does not exist, with parameters too large to create here.
        put("shmbus/d/cam.huge", b"x", Some(topic_meta(u32::MAX, u32::MAX).encode().to_vec()));
    }
    put("shmbus/d/imu", b"still alive", Some(good.clone()));
    let m = sub.recv_timeout(LONG).unwrap();
    assert_eq!(m.data(), b"still alive", "only the good message was published");
    // A good batch: its messages, one by one.
    put("shmbus/d/imu", b"onetwo", Some(batch(vec![item(5, 3), item(6, 3)])));
    assert_eq!(sub.recv_timeout(LONG).unwrap().data(), b"one");
    assert_eq!(sub.recv_timeout(LONG).unwrap().data(), b"two");
    assert!(matches!(sub.try_recv(), Err(TopicTryRecvError::Empty)));
    wait_until(LONG, "every sample counted", || {
        let st = b.stats();
        st.bad_attachment - base.bad_attachment == 250
            && st.not_allowed - base.not_allowed == 50
            && st.too_large - base.too_large == 50
            && st.open_failed - base.open_failed == 50
    });
    assert!(Topic::status(&d, "secret").is_err());
    assert!(Topic::status(&d, "cam.huge").is_err());
    let st = b.stop();
    assert_eq!(st.received - base.received, 3, "{st:?}");
}

/// A bridge (its domain under `root`) serving journal `dir` as "orders" on `port`, opening
/// sealed entries with `keys`.
fn serve_orders(root: &std::path::Path, port: u16, dir: &std::path::Path, keys: Option<&Keyring>) -> Bridge {
    let mut o = options(root, "");
    o.journals = vec![("orders".into(), dir.to_owned())];
    o.keys = keys.cloned();
    Bridge::start(session(Some(port), &[]), o).unwrap()
}

/// A bridge mirroring "orders" from `port` into `dir`, sealing its copies with `keys`.
fn mirror_orders(root: &std::path::Path, port: u16, dir: &std::path::Path, keys: Option<&Keyring>) -> Bridge {
    let mut o = options(root, "");
    o.mirrors = vec![("orders".into(), dir.to_owned())];
    o.keys = keys.cloned();
    Bridge::start(session(None, &[port]), o).unwrap()
}

/// How many entries journal `dir` holds (0 if it cannot be read).
fn entries(dir: &std::path::Path) -> u64 {
    Journal::status(dir).map(|st| st.next_index - st.first_index).unwrap_or(0)
}

#[test]
fn journal_mirror_has_the_same_entries_and_resumes() {
    let s = Scratch::new("mirror");
    let (src_dir, dst_dir) = (s.path().join("src"), s.path().join("dst"));
    let src = Journal::create_or_open(&src_dir, &JournalConfig::default()).unwrap();
    let mut app = src.appender().unwrap();
    for i in 0..1000 {
        app.send(format!("before {i}").as_bytes()).unwrap();
    }
    let port = free_port();
    let serve = |port| serve_orders(&s.dir("ra"), port, &src_dir, None);
    let mirror = || mirror_orders(&s.dir("rb"), port, &dst_dir, None);
    let count = || entries(&dst_dir);
    let a = serve(port);
    let b = mirror();
    wait_until(LONG, "the first 1000 entries mirrored", || count() == 1000);
    for i in 0..500 {
        app.send(format!("live {i}").as_bytes()).unwrap();
    }
    wait_until(LONG, "the live entries mirrored", || count() == 1500);
    // The mirror stops; the source goes on; the mirror comes back and catches up.
    drop(b);
    for i in 0..300 {
        app.send(format!("while away {i}").as_bytes()).unwrap();
    }
    let b = mirror();
    wait_until(LONG, "the mirror caught up", || count() == 1800);
    // The source restarts; the mirror keeps going.
    drop(a);
    let a = serve(port);
    for i in 0..200 {
        app.send(format!("after {i}").as_bytes()).unwrap();
    }
    wait_until(LONG, "entries after the source restarted", || count() == 2000);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(count(), 2000, "nothing appended twice");
    let read = |dir: &std::path::Path| -> Vec<Vec<u8>> {
        let j = Journal::open(dir).unwrap();
        let mut t = j.tailer().unwrap();
        std::iter::from_fn(|| t.try_recv().ok().map(|e| e.into_data())).collect()
    };
    assert_eq!(read(&dst_dir), read(&src_dir));
    let (sa, sb) = (a.stop(), b.stop());
    assert_eq!(sb.journal_mirrored, 500, "the second mirror copied only what it lacked: {sb:?}");
    assert_eq!(sa.journal_unreadable, 0);
}

#[test]
fn a_mirror_refuses_a_source_journal_made_again_under_its_name() {
    let s = Scratch::new("remade");
    let (src_dir, dst_dir) = (s.path().join("src"), s.path().join("dst"));
    let fill = |n: usize, what: &str| {
        let j = Journal::create_or_open(&src_dir, &JournalConfig::default()).unwrap();
        let mut app = j.appender().unwrap();
        for i in 0..n {
            app.send(format!("{what} {i}").as_bytes()).unwrap();
        }
    };
    fill(10, "first");
    let port = free_port();
    let serve = || serve_orders(&s.dir("ra"), port, &src_dir, None);
    let mirror = || mirror_orders(&s.dir("rb"), port, &dst_dir, None);
    let count = || entries(&dst_dir);
    let a = serve();
    let b = mirror();
    wait_until(LONG, "the first journal mirrored", || count() == 10);
    // The source journal is removed and made again, longer, under the same name.
    a.stop();
    std::fs::remove_dir_all(&src_dir).unwrap();
    fill(25, "second");
    let a = serve();
    wait_until(LONG, "the other journal refused", || b.stats().journal_foreign > 0);
    // Refused, it waits before asking again (1 s, then doubling), and drops what the other
    // journal sends live meanwhile: 20 live entries in about 2 s make at most two more
    // refusals (one per question), not one each.
    let refused = b.stats().journal_foreign;
    {
        let j = Journal::open(&src_dir).unwrap();
        let mut app = j.appender().unwrap();
        for i in 0..20 {
            app.send(format!("live {i}").as_bytes()).unwrap();
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let more = b.stats().journal_foreign - refused;
    assert!(more <= 2, "{more} more refusals while waiting");
    // And still after the mirror restarts: it remembers which journal it copies.
    b.stop();
    let b = mirror();
    wait_until(LONG, "the other journal refused after a restart", || b.stats().journal_foreign > 0);
    assert_eq!(count(), 10, "nothing of the other journal was appended");
    let (sa, sb) = (a.stop(), b.stop());
    assert_eq!(sb.journal_mirrored, 0, "{sb:?}");
    assert!(sa.journal_served > 0, "{sa:?}");
}

/// Every entry of `dir` read with `keys` (or with none): the data, or the error's text.
fn read_sealed(dir: &std::path::Path, keys: Option<&Keyring>) -> Vec<Result<Vec<u8>, String>> {
    let j = Journal::open(dir).unwrap();
    let mut t = j.tailer().unwrap();
    t.set_cipher(keys.map(|k| Arc::new(XChaCha20Poly1305Cipher::new(k)) as Arc<dyn EntryCipher>));
    let mut out = Vec::new();
    loop {
        match t.try_recv() {
            Ok(e) => out.push(Ok(e.into_data())),
            Err(JournalTryRecvError::Empty) => return out,
            Err(e) => out.push(Err(e.to_string())),
        }
    }
}

#[test]
fn an_encrypted_journal_is_mirrored_sealed_with_the_mirrors_current_key() {
    let s = Scratch::new("sealed");
    let (src_dir, dst_dir, plain_dir) = (s.path().join("src"), s.path().join("dst"), s.path().join("plain"));
    let source_keys = Keyring::new(7, [0x11; 32]);
    // The mirror's host rotated to key 8 and keeps 7 for what it already holds.
    let mut mirror_keys = Keyring::new(7, [0x11; 32]);
    mirror_keys.rotate(8, [0x22; 32]);
    let src = Journal::create_or_open(&src_dir, &JournalConfig::default()).unwrap();
    let mut app = src.appender().unwrap();
    app.set_cipher(Some(Arc::new(XChaCha20Poly1305Cipher::new(&source_keys))));
    let sent: Vec<Vec<u8>> = (0..300).map(|i| format!("order {i}").into_bytes()).collect();
    for d in &sent[..200] {
        app.send(d).unwrap();
    }
    let port = free_port();
    let a = serve_orders(&s.dir("ra"), port, &src_dir, Some(&source_keys));
    let mirror = |keys: Option<&Keyring>, dir: &std::path::Path| mirror_orders(&s.dir("rb"), port, dir, keys);
    let b = mirror(Some(&mirror_keys), &dst_dir);
    wait_until(LONG, "the sealed entries mirrored", || entries(&dst_dir) == 200);
    for d in &sent[200..] {
        app.send(d).unwrap();
    }
    wait_until(LONG, "the live sealed entries mirrored", || entries(&dst_dir) == 300);
    // The mirror restarts: it finds its last (sealed) copy committed and copies nothing twice.
    drop(b);
    let b = mirror(Some(&mirror_keys), &dst_dir);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(entries(&dst_dir), 300, "nothing appended twice after a restart");
    // The copies open with the mirror's keys, are sealed at rest with its current key (8),
    // and the source's key alone does not open them.
    let want: Vec<Result<Vec<u8>, String>> = sent.iter().cloned().map(Ok).collect();
    assert_eq!(read_sealed(&dst_dir, Some(&mirror_keys)), want);
    let at_rest = read_sealed(&dst_dir, None);
    assert_eq!(at_rest.len(), 300);
    assert!(
        at_rest.iter().all(|r| r.as_ref().is_err_and(|e| e.contains("encrypted with key id 8"))),
        "{:?}",
        &at_rest[..2]
    );
    let with_source_key = read_sealed(&dst_dir, Some(&source_keys));
    assert!(
        with_source_key.iter().all(|r| r.as_ref().is_err_and(|e| e.contains("key id 8"))),
        "{:?}",
        &with_source_key[..2]
    );
    let sb = b.stop();
    assert_eq!(sb.journal_mirrored, 0, "the restarted mirror copied nothing: {sb:?}");
    // A mirror without keys writes the opened entries as they come (the source still opens
    // them): plaintext at rest, by the mirror host's choice.
    let c = mirror(None, &plain_dir);
    wait_until(LONG, "a keyless mirror", || entries(&plain_dir) == 300);
    assert_eq!(read_sealed(&plain_dir, None), want);
    drop(c);
    let sa = a.stop();
    assert_eq!(sa.journal_unreadable, 0, "{sa:?}");
    // A source served without keys skips its sealed entries and counts them.
    let port = free_port();
    let a = serve_orders(&s.dir("rc"), port, &src_dir, None);
    let none_dir = s.path().join("none");
    let d = mirror_orders(&s.dir("rd"), port, &none_dir, None);
    wait_until(LONG, "the sealed entries counted unreadable", || a.stats().journal_unreadable >= 300);
    assert_eq!(entries(&none_dir), 0);
    drop(d);
    a.stop();
}

#[test]
fn a_mirror_refuses_a_directory_that_is_not_its_own() {
    let s = Scratch::new("refuse");
    let dir = s.path().join("j");
    let j = Journal::create_or_open(&dir, &JournalConfig::default()).unwrap();
    j.appender().unwrap().send(b"mine").unwrap();
    let mut o = options(&s.dir("r"), "");
    o.mirrors = vec![("orders".into(), dir.clone())];
    let e = Bridge::start(session(None, &[]), o).unwrap_err().to_string();
    assert!(e.contains("not a mirror of \"orders\""), "{e}");

    // A mirror of one journal refuses to become the mirror of another.
    let dir2 = s.path().join("j2");
    let mut o = options(&s.dir("r2"), "");
    o.mirrors = vec![("orders".into(), dir2.clone())];
    drop(Bridge::start(session(None, &[]), o).unwrap());
    let mut o = options(&s.dir("r3"), "");
    o.mirrors = vec![("billing".into(), dir2)];
    let e = Bridge::start(session(None, &[]), o).unwrap_err().to_string();
    assert!(e.contains("mirrors \"orders\", not \"billing\""), "{e}");
}

#[test]
fn bridges_in_client_mode_meet_through_a_router() {
    let s = Scratch::new("router");
    let (ra, rb) = (s.dir("a"), s.dir("b"));
    let port = free_port();
    let _router = common::session_in_mode("router", port);
    let a = Bridge::start(common::session_in_mode("client", port), options(&ra, "imu")).unwrap();
    let b = Bridge::start(common::session_in_mode("client", port), options(&rb, "imu")).unwrap();
    let da = Domain::with_root("d", &ra).unwrap();
    let imu = Topic::create_or_open(&da, "imu", &TopicConfig::default().max_message_len(16).history(4)).unwrap();
    let mut p = imu.publisher().unwrap();
    let db = Domain::with_root("d", &rb).unwrap();
    wait_until(LONG, "imu through the router", || {
        p.send(b"hi").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        Topic::status(&db, "imu").is_ok_and(|st| st.last_seq > 0)
    });
    let (sa, sb) = (a.stop(), b.stop());
    assert!(sa.forwarded > 0 && sb.received > 0 && sb.forwarded == 0, "{sa:?} {sb:?}");
}
