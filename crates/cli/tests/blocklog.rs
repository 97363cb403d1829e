//! `switchyard blocklog` as a user runs it: a short write with acknowledgements, the log read
//! back, and the errors bad arguments get.

use std::process::{Command, Output};

fn switchyard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchyard")).args(args).output().expect("the binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_short_write_acknowledges_what_read_then_finds() {
    let dir = std::env::temp_dir().join(format!("blocklog-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cli.log");
    let path = path.to_str().unwrap();
    let o = switchyard(&[
        "blocklog",
        "write",
        "--path",
        path,
        "--policy",
        "g-edf",
        "--period",
        "5ms",
        "--duration",
        "400ms",
        "--acks",
    ]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    let acks = out.lines().filter(|l| l.starts_with("ack ")).count();
    assert!(acks > 100, "{acks} acknowledgements\n{out}");
    assert!(err.contains("policy g-edf:") && err.contains("write amplification"), "{err}");
    assert!(err.contains("O_DSYNC") && err.contains("not paced"), "{err}");

    let o = switchyard(&["blocklog", "read", "--path", path]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains(&format!("  records       {acks}\n")), "every acknowledged record, no more:\n{out}");
    assert!(out.contains("torn/corrupt  0") && out.trim_end().ends_with("clean"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_wrong_policy_or_duration_names_what_is_accepted() {
    let o = switchyard(&["blocklog", "write", "--path", "/tmp/unused.log", "--policy", "rgedf"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("one of: fifo, edf, g-edf, rg-edf, linger"), "{}", text(&o.stderr));
    let o = switchyard(&["blocklog", "write", "--path", "/tmp/unused.log", "--period", "4 fortnights"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("not a unit"), "{}", text(&o.stderr));
    let o =
        switchyard(&["blocklog", "write", "--path", "/tmp/blocklog-cli-big.log", "--size", "600", "--duration", "1ms"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("at most 464 bytes"), "{}", text(&o.stderr));
    let _ = std::fs::remove_file("/tmp/blocklog-cli-big.log");
}

/// A scratch directory of this test process's own.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("blocklog-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A short FIFO log (one record a block, so well over a hundred 512-byte blocks) at `path`.
fn fifo_log(path: &str) {
    let o = switchyard(&[
        "blocklog",
        "write",
        "--path",
        path,
        "--policy",
        "fifo",
        "--period",
        "5ms",
        "--duration",
        "300ms",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn write_refuses_to_overwrite_a_file_that_is_not_a_log_of_its_block_size_without_force() {
    let dir = scratch("overwrite");
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, "an ordinary file, not a log\n").unwrap();
    let notes = notes.to_str().unwrap();
    let o = switchyard(&["blocklog", "write", "--path", notes, "--duration", "50ms"]);
    let err = text(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains(notes) && err.contains("not a blocklog") && err.contains("--force"), "{err}");
    assert_eq!(std::fs::read_to_string(notes).unwrap(), "an ordinary file, not a log\n", "left as it was");

    // A log of the same block size is written over; of another size, only with --force.
    let log = dir.join("log");
    let log = log.to_str().unwrap();
    fifo_log(log);
    fifo_log(log);
    let o = switchyard(&["blocklog", "write", "--path", log, "--block-size", "4096", "--duration", "50ms"]);
    let err = text(&o.stderr);
    assert!(!o.status.success() && err.contains("512-byte blocks") && err.contains("--force"), "{err}");
    let o = switchyard(&["blocklog", "write", "--path", log, "--block-size", "4096", "--duration", "50ms", "--force"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = switchyard(&["blocklog", "write", "--path", notes, "--duration", "50ms", "--force"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = switchyard(&["blocklog", "write", "--help"]);
    assert!(text(&o.stdout).contains("block device"), "{}", text(&o.stdout));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_duration_without_a_unit_is_an_error_that_lists_the_units() {
    let _ = std::fs::remove_file("/tmp/blocklog-cli-unused.log");
    for args in [
        &["blocklog", "write", "--path", "/tmp/blocklog-cli-unused.log", "--duration", "5"][..],
        &["blocklog", "write", "--path", "/tmp/blocklog-cli-unused.log", "--deadline", "70"],
        &["bench", "blocklog", "--periods", "40ms,10", "--dir", "/nonexistent"],
    ] {
        let o = switchyard(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("needs a unit") && err.contains("ns, us, ms, s"), "{args:?}: {err}");
    }
    assert!(!std::path::Path::new("/tmp/blocklog-cli-unused.log").exists());
}
