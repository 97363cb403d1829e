//! Channel opening under credit: an opener that opens many more channels than the accepting end
//! lets be opening at once waits, and every channel carries its bytes; none is refused. A
//! channel waiting for leave when its session dies ends with an error, not a hang.

use std::time::Duration;

use switchyard_mux::{Listener, MuxConfig, MuxError, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CHANNELS: usize = 120;
const BYTES: usize = 20_000;

/// A channel's bytes, led by its number: a lost, doubled or misplaced byte shows.
fn pattern(k: usize) -> Vec<u8> {
    let mut out = (k as u32).to_be_bytes().to_vec();
    out.extend((0..BYTES).map(|i| (i * 7 + k * 13) as u8));
    out
}

/// Opens `CHANNELS` channels at once to an end whose application accepts one every few
/// milliseconds, with a backlog of 8 and a window of `window`; returns the channels whose bytes
/// all arrived, those refused, and the far end's count of refusals. Fails if the far end still
/// holds a channel 10 s after every one has ended (a refused channel was kept for ever).
async fn slow_acceptor(window: u64) -> (usize, Vec<String>, u64) {
    let server_config =
        MuxConfig { key: b"opening".to_vec(), open_window: window, accept_backlog: 8, ..MuxConfig::default() };
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), server_config).await.unwrap();
    let addr = listener.local_addr();
    let far = tokio::spawn(async move {
        let session = listener.accept().await.unwrap();
        let mut whole = 0;
        let mut readers = Vec::new();
        while whole + readers.len() < CHANNELS {
            let Ok(Some(mut ch)) = tokio::time::timeout(Duration::from_secs(5), session.accept()).await else {
                break;
            };
            // A slow application: it gets round to the next channel only now and then.
            tokio::time::sleep(Duration::from_millis(3)).await;
            readers.push(tokio::spawn(async move {
                let mut got = Vec::new();
                let read = ch.read_to_end(&mut got).await;
                let k = got.get(..4).map(|b| u32::from_be_bytes(b.try_into().unwrap()) as usize);
                read.is_ok() && k.is_some_and(|k| got == pattern(k))
            }));
            if readers.len() >= 16 {
                for r in readers.drain(..) {
                    whole += usize::from(r.await.unwrap());
                }
            }
        }
        for r in readers {
            whole += usize::from(r.await.unwrap());
        }
        // Every channel has ended both ways: the far end forgets each, the refused included.
        let mut report = session.report().await.unwrap();
        for _ in 0..100 {
            if report.channels.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            report = session.report().await.unwrap();
        }
        (whole, report.refused, report.channels.len())
    });
    let session = Session::connect(addr, MuxConfig { key: b"opening".to_vec(), ..MuxConfig::default() }).await.unwrap();
    let openers: Vec<_> = (0..CHANNELS)
        .map(|k| {
            let session = session.clone();
            tokio::spawn(async move {
                let mut ch = session.open(1.0, true).await.map_err(|e| e.to_string())?;
                ch.write_all(&pattern(k)).await.map_err(|e| e.to_string())?;
                ch.shutdown().await.map_err(|e| e.to_string())?;
                // The far end's verdict comes back as the channel's end: a refused one is reset.
                let mut rest = Vec::new();
                ch.read_to_end(&mut rest).await.map_err(|e| e.to_string())?;
                Ok::<_, String>(())
            })
        })
        .collect();
    let mut refused = Vec::new();
    for o in openers {
        if let Err(e) = o.await.unwrap() {
            refused.push(e);
        }
    }
    let (whole, refused_there, left_there) = far.await.unwrap();
    assert_eq!(left_there, 0, "channels the far end still holds 10 s after every channel ended");
    (whole, refused, refused_there)
}

/// With a window of 4 the opener waits for the slow application, and every channel arrives
/// whole. (With a window wider than the backlog, as before open credit, the channels past the
/// backlog of 8 were refused: `a_window_wider_than_the_backlog_refuses_what_does_not_fit`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opener_of_many_channels_waits_for_a_slow_acceptor_and_nothing_is_refused() {
    let (whole, refused, refused_there) =
        tokio::time::timeout(Duration::from_secs(60), slow_acceptor(4)).await.expect("no hang");
    assert_eq!(refused, Vec::<String>::new());
    assert_eq!((whole, refused_there), (CHANNELS, 0));
}

/// The accept backlog still refuses, visibly, when the user sets it below the window: the
/// opener's application sees the reset with its reason, and nothing ends clean and short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_wider_than_the_backlog_refuses_what_does_not_fit() {
    let (whole, refused, refused_there) =
        tokio::time::timeout(Duration::from_secs(60), slow_acceptor(1 << 20)).await.expect("no hang");
    assert!(!refused.is_empty(), "a burst of {CHANNELS} past a backlog of 8 with no window to wait on");
    assert!(refused.iter().all(|e| e.contains("accept backlog")), "{refused:?}");
    assert_eq!(refused_there as usize, refused.len());
    assert_eq!(whole + refused.len(), CHANNELS, "every channel whole or refused");
}

/// A channel waiting for leave to open when the session dies ends with an error saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_waiting_for_leave_ends_with_an_error_when_the_session_dies() {
    let server_config = MuxConfig {
        key: b"opening".to_vec(),
        open_window: 2,
        linger: Duration::from_millis(100),
        ..MuxConfig::default()
    };
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), server_config).await.unwrap();
    let addr = listener.local_addr();
    let client = MuxConfig {
        key: b"opening".to_vec(),
        reconnect: false,
        idle_timeout: Duration::from_millis(300),
        ..MuxConfig::default()
    };
    let session = Session::connect(addr, client).await.unwrap();
    let far = listener.accept().await.unwrap();
    // Two open (the window), never accepted; the third waits.
    let _a = session.open(1.0, true).await.unwrap();
    let _b = session.open(1.0, true).await.unwrap();
    let waiting = tokio::spawn({
        let session = session.clone();
        async move { session.open(1.0, true).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "the third open waits for leave");
    assert_eq!(session.report().await.unwrap().waiting_to_open, 1);
    // The far end goes away.
    drop(far);
    drop(listener);
    let result = tokio::time::timeout(Duration::from_secs(20), waiting).await.expect("the waiting open ends").unwrap();
    match result {
        Err(e @ MuxError::NotOpened(_)) => assert!(e.to_string().contains("session stopped"), "{e}"),
        other => panic!("{other:?}"),
    }
}
