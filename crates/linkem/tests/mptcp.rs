//! Linux MPTCP in namespaces the tests make: one connection carries its bytes over several
//! subflows, on a namespace's loopback and across the emulated dumbbell's extra addresses, as
//! `ss` shows. Skips, saying so, where MPTCP or namespaces are not available.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use socket2::Socket;
use switchyard_linkem::mptcp::{self, Loopback, Subflow};
use switchyard_linkem::{Dumbbell, LinkConfig, LinkemError, Namespace};

fn available<T>(made: Result<T, LinkemError>) -> Option<T> {
    match made {
        Ok(t) => Some(t),
        Err(LinkemError::Unavailable(why)) => {
            eprintln!("SKIPPED: {why}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// A blocking MPTCP connection from `from` to `to`, made in the calling thread's namespace.
fn connect(from: Ipv4Addr, to: SocketAddr) -> std::net::TcpStream {
    let s: Socket = mptcp::stream_socket(true).unwrap().into();
    s.set_nonblocking(false).unwrap();
    s.bind(&SocketAddr::from((from, 0)).into()).unwrap();
    s.connect(&to.into()).unwrap();
    s.into()
}

/// Sends `bytes` from `from` to a sink at `to` in the same or another namespace, and returns what
/// `ss` showed in the sender's namespace before the connection closed, and what the sink read.
fn carry(
    sender: &Namespace,
    receiver: &Namespace,
    from: Ipv4Addr,
    to: SocketAddr,
    bytes: usize,
) -> (Vec<Subflow>, usize) {
    let listener = receiver.spawn(move || mptcp::listener(to, true).unwrap()).join().unwrap().unwrap();
    listener.set_nonblocking(false).unwrap();
    let (all_read, read) = std::sync::mpsc::channel();
    let sink = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let (mut n, mut buf) = (0, vec![0u8; 1 << 16]);
        loop {
            match s.read(&mut buf).unwrap() {
                0 => return n,
                k => n += k,
            }
            if n == bytes {
                let _ = all_read.send(());
            }
        }
    });
    let name = sender.name().to_owned();
    let shown = sender
        .spawn(move || {
            let mut s = connect(from, to);
            let chunk = vec![7u8; 1 << 16];
            for _ in 0..bytes / chunk.len() {
                s.write_all(&chunk).unwrap();
            }
            // Everything read, so (nearly) everything acknowledged: ss reads the counters while
            // the subflows are still established.
            read.recv_timeout(Duration::from_secs(60)).expect("the sink read every byte");
            std::thread::sleep(Duration::from_millis(100));
            let out = std::process::Command::new("ip").args(["netns", "exec", &name, "ss", "-tniH"]).output().unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            mptcp::parse_ss(&String::from_utf8_lossy(&out.stdout))
        })
        .join()
        .unwrap()
        .unwrap();
    (shown, sink.join().unwrap())
}

/// The subflows from `sources` that carried bytes.
fn carrying(shown: &[Subflow], sources: &[Ipv4Addr]) -> Vec<Subflow> {
    shown
        .iter()
        .filter(|s| s.mptcp && s.bytes_acked > 0 && sources.iter().any(|a| s.local.ip() == std::net::IpAddr::V4(*a)))
        .cloned()
        .collect()
}

#[test]
fn an_mptcp_connection_on_a_namespaces_loopback_carries_its_bytes_over_every_subflow() {
    let Some(net) = available(Loopback::new(3)) else { return };
    let to = SocketAddr::V4(SocketAddrV4::new(net.server, 7300));
    let bytes = 256 << 20;
    let (shown, got) = carry(&net.ns, &net.ns, net.clients[0], to, bytes);
    assert_eq!(got, bytes, "every byte arrived");
    let used = carrying(&shown, &net.clients);
    eprintln!("{used:#?}");
    assert!(used.len() >= 2, "at least two subflows carried bytes: {shown:#?}");
    // One subflow from each client address: the first and the two endpoints.
    let mut sources: Vec<_> = shown.iter().filter(|s| s.mptcp && s.peer == to).map(|s| s.local.ip()).collect();
    sources.sort();
    sources.dedup();
    assert_eq!(sources.len(), 3, "{shown:#?}");
    // Every byte on some subflow (acknowledgements may lag the last few by a window).
    assert!(used.iter().map(|s| s.bytes_acked).sum::<u64>() >= bytes as u64 / 2, "{used:#?}");
}

#[test]
fn more_subflows_than_the_kernel_takes_are_refused_in_one_line() {
    match Loopback::new(mptcp::MAX_SUBFLOWS + 1) {
        Err(LinkemError::Unavailable(why)) => assert!(why.contains("at most 8 joined"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_mptcp_connection_crosses_the_dumbbell_from_each_of_the_left_sides_addresses() {
    if let Err(LinkemError::Unavailable(why)) = mptcp::enabled() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    // A fast link: the test is about paths, not rates.
    let link = LinkConfig { rate_bps: 200_000_000, delay: Duration::from_millis(2), ..LinkConfig::default() };
    let Some(d) = available(Dumbbell::with_addresses(link, LinkConfig { seed: 2, ..link }, 2, 1)) else { return };
    let left = [Dumbbell::left_address(0), Dumbbell::left_address(1)];
    assert_eq!(left[1], Ipv4Addr::new(10, 200, 1, 1));
    mptcp::endpoints(&d.left, &left[1..]).unwrap();
    mptcp::accept_joins(&d.right, 1).unwrap();
    let to = SocketAddr::from((Dumbbell::RIGHT, 7301));
    let bytes = 8 << 20;
    let (shown, got) = carry(&d.left, &d.right, left[0], to, bytes);
    assert_eq!(got, bytes, "every byte arrived");
    let used = carrying(&shown, &left);
    assert_eq!(used.len(), 2, "a subflow from each left address carried bytes: {shown:#?}");
}
