//! Real TCP across the emulated link: it gets the link's rate, and its handshake takes the
//! link's round trip. Skips, saying so, where namespaces cannot be made.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use switchyard_linkem::{Dumbbell, LinkConfig, LinkemError};

fn dumbbell(config: LinkConfig) -> Option<Dumbbell> {
    match Dumbbell::new(config, LinkConfig { seed: 2, ..config }) {
        Ok(d) => Some(d),
        Err(LinkemError::Unavailable(why)) => {
            eprintln!("SKIPPED: {why}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn tcp_gets_the_links_rate_and_round_trip() {
    let Some(d) = dumbbell(LinkConfig::default()) else { return };
    let addr = SocketAddr::from((Dumbbell::RIGHT, 5001));
    let server = d.right.spawn(move || {
        let l = TcpListener::bind(addr).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let mut n = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let k = s.read(&mut buf).unwrap();
            if k == 0 {
                return n;
            }
            n += k;
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    let client = d.left.spawn(move || {
        let t = Instant::now();
        let mut s = TcpStream::connect(addr).unwrap();
        let handshake = t.elapsed();
        let data = vec![1u8; 3_000_000];
        let t = Instant::now();
        s.write_all(&data).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        // Wait for the server to have read everything (it closes after EOF).
        let _ = s.read(&mut [0u8; 1]);
        (handshake, t.elapsed())
    });
    let (handshake, took) = client.join().unwrap().unwrap();
    let got = server.join().unwrap().unwrap();
    assert_eq!(got, 3_000_000);
    let mbps = got as f64 * 8.0 / took.as_secs_f64() / 1e6;
    eprintln!("handshake {handshake:?}, {mbps:.2} Mb/s, link {:?}", d.stats());
    assert!(handshake >= Duration::from_millis(50), "a 50 ms round trip: {handshake:?}");
    assert!(mbps <= 10.5, "no faster than the link: {mbps:.2} Mb/s");
    assert!(mbps >= 6.0, "near the link's 10 Mb/s: {mbps:.2} Mb/s");
}
