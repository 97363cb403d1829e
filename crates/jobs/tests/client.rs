//! The submitter's errors on the commonest mistakes (issue 35): a wrong token says "wrong
//! token", whatever the size of the input; a coordinator that is not running says "cannot
//! reach the coordinator at ADDR: connection refused".

use std::sync::Arc;
use std::time::Duration;

use switchyard_core::place::tasks::BoardConfig;
use switchyard_jobs::client::Submitter;
use switchyard_jobs::server::{Limits, serve};
use switchyard_jobs::{Coordinator, Shared, Store, Submission, Sync};

async fn start(name: &str) -> (String, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let dir = std::env::temp_dir().join(format!("switchyard-client-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::open(&dir.join("jobs.db"), Sync::Normal).unwrap();
    let coordinator = Coordinator::open(store, BoardConfig::default(), Duration::ZERO).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel();
    let shared: Arc<Shared> = Shared::new(coordinator, "right".into());
    let task = tokio::spawn(async move {
        serve(listener, shared, Limits::default(), async {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    (base, tx, task)
}

fn wordcount() -> Submission {
    Submission {
        name: "t".into(),
        program: "wordcount".into(),
        arg: String::new(),
        reduces: 1,
        deadline: 60.0,
        split: 1 << 20,
        estimate: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_says_wrong_token_whatever_the_input() {
    let (base, stop, task) = start("token").await;
    let wrong = Submitter::new(&base, "wrong");
    let e = wrong.status().await.unwrap_err().to_string();
    assert!(e.contains("wrong token") && e.contains(&base), "{e}");
    let e = wrong.submit(&wordcount(), b"a b\n".to_vec()).await.unwrap_err().to_string();
    assert!(e.contains("wrong token"), "a small input: {e}");
    // A large input: the coordinator answers 401 before reading the body, and closes the
    // connection while the client is still sending it.
    let big: Vec<u8> = b"lorem ipsum dolor\n".iter().copied().cycle().take(64 << 20).collect();
    let e = wrong.submit(&wordcount(), big).await.unwrap_err().to_string();
    assert!(e.contains("wrong token"), "a large input: {e}");
    assert!(!e.contains("error sending request"), "{e}");
    // The right token still works, and nothing was submitted.
    assert!(Submitter::new(&base, "right").status().await.unwrap().is_empty());
    let _ = stop.send(());
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_that_is_down_reads_as_connection_refused() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let e = Submitter::new(&base, "t").status().await.unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with(&format!("cannot reach the coordinator at {base}: connection refused")), "{text}");
    assert!(text.contains("switchyard jobs serve"), "{text}");
    let e = Submitter::new(&base, "t").submit(&wordcount(), b"a\n".to_vec()).await.unwrap_err().to_string();
    assert!(e.contains("connection refused"), "{e}");
}

/// A coordinator that refuses the token answers at once and closes the connection while a
/// large body is still coming; the kernel then resets it, and the reset can reach the client
/// before the answer does, so the client sees its send fail ("error sending request"), not
/// the 401. Here the first connection is reset without an answer (the worst case of that
/// race): the client asks again without a body to learn why, and says "wrong token".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_cut_short_by_a_refused_token_says_wrong_token() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let mut incoming = listener.incoming();
        // Dropped with the body unread: the kernel resets the connection.
        let mut first = incoming.next().unwrap().unwrap();
        let mut head = [0u8; 4096];
        let _ = first.read(&mut head).unwrap();
        drop(first);
        // The question without a body: refused.
        let mut probe = incoming.next().unwrap().unwrap();
        let _ = probe.read(&mut head).unwrap();
        let _ = probe.write_all(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 5\r\nconnection: close\r\n\r\nnope\n");
    });
    let big: Vec<u8> = vec![b'a'; 64 << 20];
    let e = Submitter::new(&base, "wrong").submit(&wordcount(), big).await.unwrap_err().to_string();
    assert!(e.contains("wrong token") && e.contains(&base), "{e}");
    drop(server); // it waits for the probe, which the client sends only after a failed send
}
