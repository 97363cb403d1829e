//! The checks the `jobs_inputs` fuzz target and its corpus replay share: every parser of what
//! reaches the coordinator or a worker from outside, on any bytes.

use crate::programs::{self, NoCommands, Program};
use crate::wire::{Poll, decode_parts, encode_parts};

/// Reads `data` as each outside input; panics only on a broken promise.
pub fn check(data: &[u8]) {
    // A result body: whatever decodes encodes back to the same bytes.
    for count in 0..4 {
        if let Ok(parts) = decode_parts(data, count) {
            let owned: Vec<Vec<u8>> = parts.into_iter().map(<[u8]>::to_vec).collect();
            assert_eq!(encode_parts(&owned), data);
        }
    }
    // A poll's body.
    let _ = serde_json::from_slice::<Poll>(data);
    // A submission: program name and argument (split at the first NUL), then the input.
    let (head, input) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b""[..]),
    };
    let head = String::from_utf8_lossy(head);
    let (name, arg) = head.split_once(' ').unwrap_or((&head, ""));
    // Splitting keeps every byte, in order.
    assert_eq!(programs::split(input, 1 + data.len() % 7).concat(), input);
    let Ok(program) = Program::parse(name, arg) else { return };
    // Allow-listed commands run the operator's programs, not ours; sleep only sleeps.
    if matches!(program, Program::Exec { .. } | Program::Sleep { .. }) || program.check_input(input).is_err() {
        return;
    }
    for reduces in [0, 1, 3] {
        if program.check_shape(reduces).is_err() {
            continue;
        }
        let parts = programs::run_map(&program, input, reduces, &NoCommands).expect("a checked input maps");
        assert_eq!(parts.len(), reduces.max(1) as usize);
        if reduces > 0 {
            // A reduce reads any records without a panic (they come from workers).
            for p in &parts {
                let _ = programs::run_reduce(&program, p, &NoCommands);
            }
            let _ = programs::run_reduce(&program, input, &NoCommands);
        }
    }
}
