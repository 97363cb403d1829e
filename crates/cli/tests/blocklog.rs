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
    assert!(out.contains("torn/corrupt  0") && out.contains("\n  clean: "), "{out}");
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
fn a_torn_block_0_is_not_read_as_the_older_log_it_overwrote() {
    let dir = scratch("torn0");
    let path = dir.join("reused.log");
    let path = path.to_str().unwrap();
    fifo_log(path);
    // A second log on the same (block) device, killed while writing its block 0: its header went
    // out with a new log id, the rest of the block did not, and every later block is the first
    // log's.
    let mut bytes = std::fs::read(path).unwrap();
    bytes[8..16].copy_from_slice(&0x5ec0_u64.to_le_bytes());
    std::fs::write(path, &bytes).unwrap();
    let o = switchyard(&["blocklog", "read", "--path", path]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(2), "an error, not the older log's records:\n{out}\n{err}");
    assert!(err.contains(path) && err.contains("block 0") && err.contains("--log-id"), "{err}");
    assert!(!out.contains("records "), "no record is read as this log's:\n{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn read_tells_a_torn_tail_from_records_lost_in_the_middle_by_its_exit_status() {
    let dir = scratch("verdict");
    let path = dir.join("log");
    let path = path.to_str().unwrap();
    fifo_log(path);
    let bytes = std::fs::read(path).unwrap();
    let blocks = bytes.len() / 512;
    assert!(blocks > 10, "{blocks} blocks");

    let o = switchyard(&["blocklog", "read", "--path", path]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains(&format!("last intact   block {}", blocks - 1)), "{out}");

    // A crash during the last write: only the block after the last intact one is torn.
    let tail = dir.join("tail");
    let mut torn = bytes.clone();
    torn[(blocks - 1) * 512 + 40..].fill(0xa5);
    std::fs::write(&tail, &torn).unwrap();
    let o = switchyard(&["blocklog", "read", "--path", tail.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert!(out.contains("torn tail") && out.contains(&format!("last intact   block {}", blocks - 2)), "{out}");

    // A corruption in the middle: records after it are intact, so the ones in it are lost.
    let hole = dir.join("hole");
    let mut holed = bytes;
    holed[2 * 512 + 40..3 * 512].fill(0xa5);
    std::fs::write(&hole, &holed).unwrap();
    let o = switchyard(&["blocklog", "read", "--path", hole.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{out}");
    assert!(out.contains("records lost") && out.contains(&format!("last intact   block {}", blocks - 1)), "{out}");

    let o = switchyard(&["blocklog", "read", "--help"]);
    let help = text(&o.stdout);
    for code in ["0 ", "3 ", "4 "] {
        assert!(help.contains(&format!("  {code}")), "exit code {code}in --help:\n{help}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
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
