//! `shmbus serve` and `shmbus call` as real processes against a scratch root: echo, a
//! command per request, a command that fails or hangs (its request fails or times out, the
//! server keeps serving), JSON output, and `ls`/`info` on a service.

mod common;

use common::{json_lines, one_error_line, Root};

#[test]
fn serve_echo_answers_calls_and_info_shows_the_service() {
    let r = Root::new();
    let server = r.spawn(&["serve", "--domain", "d", "svc", "--echo", "--count", "3", "--max-in-flight", "2"]);
    let info = r.wait_info("d", "svc", |v| v["status"]["servers"] == 1);
    assert_eq!(info["kind"], "service");
    assert_eq!(info["status"]["max_in_flight"], 2);
    assert_eq!(r.ok(&["call", "--domain", "d", "svc", "--data", "hello"]), "hello\n");
    // A request on stdin, and in hex; the response that is not UTF-8 prints as hex.
    let out = r.run_stdin(&["call", "--domain", "d", "svc"], b"from stdin\n");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from stdin\n");
    let v = json_lines(&r.ok(&["call", "d/svc", "--format", "hex", "--data", "00ff", "--json"]));
    assert_eq!(v.len(), 1);
    assert_eq!((v[0]["last"].as_bool(), v[0]["len"].as_u64()), (Some(true), Some(2)));
    assert!(v[0]["request_id"].as_u64().is_some() && v[0]["data_base64"] == "AP8=", "{}", v[0]);
    let served = server.finish_ok();
    assert_eq!(served.lines().count(), 3, "{served}");
    assert!(served.lines().all(|l| l.starts_with("request ") && l.contains(" bytes -> ")), "{served}");
    let ls = r.ok(&["ls", "--domain", "d"]);
    assert!(ls.contains("service"), "{ls}");
    // top's note and info's status count the service's requests, responses and timeouts.
    let top = r.ok(&["top", "--once", "--interval", "0.1"]);
    let row = top.lines().find(|l| l.contains("svc")).unwrap_or_else(|| panic!("{top}"));
    assert!(row.contains("service") && row.contains("3 requests") && row.contains("3 responses, 0 timeouts"), "{top}");
    let info = r.json(&["info", "--domain", "d", "svc", "--json"]);
    assert_eq!((info["status"]["requests"].as_u64(), info["status"]["timeouts"].as_u64()), (Some(3), Some(0)));
}

#[test]
fn serve_runs_a_command_per_request_and_survives_one_that_fails_or_hangs() {
    let r = Root::new();
    let script = "read line; case \"$line\" in fail) exit 3;; hang) sleep 30;; *) echo \"got $line\";; esac";
    let server = r.spawn(&[
        "serve",
        "--domain",
        "d",
        "svc",
        "--json",
        "--jobs",
        "2",
        "--cmd-timeout-ms",
        "500",
        "--count",
        "4",
        "--",
        "sh",
        "-c",
        script,
    ]);
    r.wait_info("d", "svc", |v| v["status"]["servers"] == 1);
    assert_eq!(r.ok(&["call", "--domain", "d", "svc", "--data", "one"]), "got one\n");
    // A command that fails: the call fails at once, with a clear line.
    let out = r.run(&["call", "--domain", "d", "svc", "--data", "fail", "--timeout-ms", "20000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).contains("failed request"), "{}", one_error_line(&out));
    // A command that hangs: the call times out first; the server kills it and goes on.
    let out = r.run(&["call", "--domain", "d", "svc", "--data", "hang", "--timeout-ms", "100"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).contains("timed out"), "{}", one_error_line(&out));
    assert_eq!(r.ok(&["call", "--domain", "d", "svc", "--data", "two"]), "got two\n");
    // The hung command is killed after --cmd-timeout-ms and its request reported failed:
    // the fourth request answered, the server exits (--count 4).
    let lines = json_lines(&server.finish_ok());
    assert_eq!(lines.len(), 4, "{lines:?}");
    let info = r.ok(&["info", "--domain", "d", "svc", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(
        (v["status"]["requests_pending"].as_u64(), v["status"]["requests_in_flight"].as_u64()),
        (Some(0), Some(0)),
        "{v}"
    );
    let failed: Vec<&str> =
        lines.iter().filter(|l| l["failed"] == true).map(|l| l["reason"].as_str().unwrap()).collect();
    assert!(failed.iter().any(|w| w.contains("exited with")), "{lines:?}");
    assert!(failed.iter().any(|w| w.contains("killed")), "{lines:?}");
}

#[test]
fn call_errors_are_clear() {
    let r = Root::new();
    let e = r.fails(&["call", "--domain", "d", "nothing", "--data", "x"]);
    assert!(e.contains("nothing"), "{e}");
    // A service with no server: refused at once.
    let server = r.spawn(&["serve", "--domain", "d", "svc", "--echo", "--count", "1"]);
    r.wait_info("d", "svc", |v| v["status"]["servers"] == 1);
    r.ok(&["call", "--domain", "d", "svc", "--data", "last one"]);
    server.finish_ok();
    let e = r.fails(&["call", "--domain", "d", "svc", "--data", "x"]);
    assert!(e.contains("no server"), "{e}");
    // pub and sub point at serve and call.
    let e = r.fails(&["pub", "--domain", "d", "svc", "--data", "x"]);
    assert!(e.contains("shmbus call"), "{e}");
}

#[test]
fn a_service_with_schemas_is_called_and_served_in_json() {
    let r = Root::new();
    let dir = tempfile_dir(&r);
    let (req_msg, resp_msg) = (dir.join("AddTwoInts_Request.msg"), dir.join("AddTwoInts_Response.msg"));
    std::fs::write(&req_msg, "int64 a\nint64 b\n").unwrap();
    std::fs::write(&resp_msg, "int64 sum\n").unwrap();
    // The command reads the request as one JSON line and prints the response as JSON; a
    // request with a == 0 prints something that is not JSON, failing that request.
    let script = "import json, sys\nr = json.loads(sys.stdin.readline())\nprint(json.dumps({'sum': r['a'] + r['b']}) if r['a'] else 'not json')";
    let (req_path, resp_path) = (req_msg.to_str().unwrap(), resp_msg.to_str().unwrap());
    let server = r.spawn(&[
        "serve",
        "--domain",
        "d",
        "add",
        "--count",
        "3",
        "--request-message-encoding",
        "cdr",
        "--request-schema-name",
        "example_interfaces/srv/AddTwoInts_Request",
        "--request-schema-encoding",
        "ros2msg",
        "--request-schema-file",
        req_path,
        "--response-message-encoding",
        "cdr",
        "--response-schema-name",
        "example_interfaces/srv/AddTwoInts_Response",
        "--response-schema-encoding",
        "ros2msg",
        "--response-schema-file",
        resp_path,
        "--",
        "python3",
        "-c",
        script,
    ]);
    let info = r.wait_info("d", "add", |v| v["status"]["servers"] == 1);
    assert_eq!(info["schema_name"], "example_interfaces/srv/AddTwoInts_Request", "{info}");
    assert_eq!(info["response_schema"]["schema_name"], "example_interfaces/srv/AddTwoInts_Response", "{info}");
    assert_eq!(r.ok(&["schema", "--domain", "d", "add", "--response"]), "int64 sum\n");
    assert_eq!(r.ok(&["schema", "--domain", "d", "add"]), "int64 a\nint64 b\n");

    // JSON and one-line YAML in, the response decoded out.
    let sum: serde_json::Value =
        serde_json::from_str(&r.ok(&["call", "--domain", "d", "add", "--data", r#"{"a": 40, "b": 2}"#])).unwrap();
    assert_eq!(sum, serde_json::json!({"sum": 42}));
    let v = json_lines(&r.ok(&["call", "d/add", "--data", "{a: -5, b: 3}", "--json"]));
    assert_eq!(
        (v.len(), &v[0]["msg"], &v[0]["last"]),
        (1, &serde_json::json!({"sum": -2}), &serde_json::json!(true)),
        "{v:?}"
    );
    // A request that does not fit the schema is refused before it is sent.
    let e = r.fails(&["call", "d/add", "--data", r#"{"a": "x"}"#]);
    assert!(e.contains("--data") && e.contains("nothing of it was sent"), "{e}");
    // Output that is not JSON fails the request, and the server goes on.
    let out = r.run(&["call", "d/add", "--data", "{a: 0, b: 1}"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).contains("failed request"), "{}", one_error_line(&out));
    let served = server.finish_ok();
    assert!(served.contains("printed no JSON value"), "{served}");
    // A topic has no response schema.
    r.ok(&["create", "--kind", "topic", "--domain", "d", "t"]);
    assert!(r.fails(&["schema", "--domain", "d", "t", "--response"]).contains("only a service"));
}

/// A directory of its own under the test's root.
fn tempfile_dir(r: &Root) -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(r.jdir("schemas"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
