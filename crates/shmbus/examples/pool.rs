//! A work pool: one dispatcher and three worker processes (this same binary, run with the
//! argument `worker`). Jobs go only to workers that are waiting; the rest come back to the
//! dispatcher, which here retries them a moment later.
//!
//! `cargo run --example pool` (set `SHMBUS_ROOT` to keep the segment out of `/dev/shm`).

use std::error::Error;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use shmbus::pool::{Pool, PoolConfig, PoolRecvError, PoolTrySendError};
use shmbus::Domain;

const POOL: &str = "pool-example";
const JOBS: u64 = 30;

fn main() -> Result<(), Box<dyn Error>> {
    let domain = Domain::new("example")?;
    if std::env::args().nth(1).as_deref() == Some("worker") {
        return worker(&domain);
    }
    let pool = Pool::create_or_open(&domain, POOL, &PoolConfig::default().max_workers(4).max_job_len(64))?;
    let mut dispatcher = pool.dispatcher()?;
    let mut workers: Vec<Child> =
        (0..3).map(|_| Command::new(std::env::current_exe()?).arg("worker").spawn()).collect::<Result<_, _>>()?;
    let start = Instant::now();
    while dispatcher.status().idle < 3 {
        if start.elapsed() > Duration::from_secs(20) {
            return Err("workers did not start".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }

    let mut sent = 0;
    let mut returned = 0;
    while sent < JOBS {
        let job = format!("resize image {sent}");
        match dispatcher.try_send(job.as_bytes()) {
            Ok(d) => {
                println!("dispatcher: job {} -> worker {}", d.job_id, d.worker);
                sent += 1;
            }
            Err(PoolTrySendError::AllBusy) => {
                returned += 1; // return to sender: a real system might drop or defer it
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(e) => return Err(e.into()),
        }
        for lost in dispatcher.reap() {
            println!("dispatcher: worker {} died holding job {}", lost.pid, lost.job_id);
        }
    }
    let status = dispatcher.status();
    println!(
        "dispatcher: {} jobs dispatched ({returned} handed back while all were busy), {} workers",
        status.dispatched, status.workers
    );
    drop(dispatcher); // workers finish what they hold, then see Orphaned and exit
    for mut w in workers.drain(..) {
        if !w.wait()?.success() {
            return Err("a worker failed".into());
        }
    }
    std::fs::remove_file(domain.channel_path(POOL)?)?;
    println!("all {JOBS} jobs done");
    Ok(())
}

fn worker(domain: &Domain) -> Result<(), Box<dyn Error>> {
    let mut worker = Pool::open(domain, POOL)?.worker()?;
    let me = std::process::id();
    loop {
        match worker.recv_ref() {
            Ok(job) => {
                println!("worker {me}: job {}: {}", job.id(), String::from_utf8_lossy(job.data()));
                std::thread::sleep(Duration::from_millis(2)); // the work
            }
            Err(PoolRecvError::Orphaned) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}
