//! A typed service: `AddTwoInts` requests answered by a server thread, with the request and
//! response types' schemas stored in the service (so `shmbus call` can speak JSON to it),
//! several requests in flight matched by id, a response built in place, and a streamed
//! answer (a countdown). Run with `cargo run --example service` (set `SHMBUS_ROOT` to keep it
//! out of /dev/shm).

use std::time::Duration;

use shmbus::service::{Service, ServiceConfig};
use shmbus::Domain;

#[derive(Debug, Clone, Copy, shmbus::Pod)]
#[repr(C)]
struct AddTwoInts {
    a: i64,
    b: i64,
}

#[derive(Debug, Clone, Copy, shmbus::Pod)]
#[repr(C)]
struct Sum {
    sum: i64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let domain = Domain::new(&format!("example-{}", std::process::id()))?;
    let config = ServiceConfig::for_types::<AddTwoInts, Sum>().max_in_flight(4).response_depth(2);
    let svc = Service::create_or_open(&domain, "add", &config)?;
    let (req, resp) = (svc.request_schema().expect("derived"), svc.response_schema().expect("derived"));
    println!("requests {} / responses {}", req.name(), resp.name());

    // The server: each request read in place; a negative `a` asks for a countdown stream.
    let mut server = svc.server_of::<AddTwoInts, Sum>()?;
    let serving = std::thread::spawn(move || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        for _ in 0..5 {
            let mut request = server.recv_timeout(Duration::from_secs(10))?;
            let AddTwoInts { a, b } = *request.value();
            if a < 0 {
                for n in (1..=-a).rev() {
                    request.respond(&Sum { sum: n })?;
                }
                request.end();
            } else {
                // Built in place in the client's response cell.
                let mut cell = request.loan()?;
                cell.sum = a + b;
                cell.send_last();
            }
        }
        Ok(())
    });

    let mut client = svc.client_of::<AddTwoInts, Sum>()?;
    let sum = client.call(&AddTwoInts { a: 40, b: 2 }, Duration::from_secs(5))?;
    println!("40 + 2 = {}", sum.sum);

    // Three in flight at once; the responses come back matched to their ids.
    let ids: Vec<u64> =
        (1..=3).map(|i| client.try_send_request(&AddTwoInts { a: i, b: 100 * i })).collect::<Result<_, _>>()?;
    for id in &ids {
        let r = client.recv_response_for(*id)?;
        println!("request {} answered: {}", r.request_id, r.value.map_or(0, |v| v.sum));
    }

    // A stream of responses to one request, then its end.
    let id = client.try_send_request(&AddTwoInts { a: -3, b: 0 })?;
    let mut countdown = Vec::new();
    loop {
        let r = client.recv_response_for(id)?;
        // `end()` sends an empty last response: no value.
        countdown.extend(r.value.map(|v| v.sum));
        if r.last {
            break;
        }
    }
    println!("countdown {countdown:?}");
    serving.join().expect("server thread").map_err(|e| e.to_string())?;
    std::fs::remove_dir_all(domain.dir())?;
    Ok(())
}
