//! Followers sleep on the generation word of a read-only mapping and the publisher's
//! bump wakes them.

use gpupeek_shm::{Options, Publisher, Segment};
use std::time::Duration;

#[test]
fn a_reader_sleeping_on_the_generation_is_woken_by_a_publish() {
    let name = format!("gpupeek-test-futex-{}", std::process::id());
    let lock_dir = std::env::temp_dir().join(&name);
    std::fs::create_dir_all(&lock_dir).unwrap();
    let options = Options {
        gpu_capacity: 1,
        proc_capacity: 1,
        lock_dir: lock_dir.clone(),
        ..Options::new(7, std::process::id())
    };
    let publisher = Publisher::create(&name, &options).unwrap();
    let reader = Segment::open(&name).unwrap();
    let seen = reader.generation();
    // Nothing published: a short wait times out and reports the same generation.
    assert_eq!(
        reader.wait_generation(seen, Duration::from_millis(10)),
        seen
    );
    let waiter = std::thread::spawn(move || {
        // Far longer than the test's watchdog: only a wake (or the bump seen before
        // sleeping) ends this wait in time.
        reader.wait_generation(seen, Duration::from_secs(3600))
    });
    std::thread::sleep(Duration::from_millis(50));
    let next = publisher.bump_generation();
    assert_eq!(waiter.join().unwrap(), next);
    let _ = std::fs::remove_file(format!("/dev/shm/{name}"));
    let _ = std::fs::remove_dir_all(lock_dir);
}
