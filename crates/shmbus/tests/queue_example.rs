//! Runs the request/reply example (`examples/queue_request_reply.rs`) as a test.
#![cfg(not(loom))]

#[allow(dead_code)]
#[path = "../examples/queue_request_reply.rs"]
mod example;

#[test]
fn request_reply_example_answers_every_request() {
    let root = std::path::PathBuf::from(format!("/dev/shm/shmbus-test-queue-example-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let _cleanup = TempRoot(root.clone());
    let domain = shmbus::Domain::with_root("example", &root).unwrap();
    let total = example::run(&domain).unwrap();
    assert_eq!(total, 150);
    // The example cleans up after itself.
    assert!(domain.channel_names().unwrap().is_empty());
}

/// Removes the test's root directory, also when the test fails.
struct TempRoot(std::path::PathBuf);

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
