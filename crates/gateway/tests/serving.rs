//! The serving layer (`listener`, `tls`) with a real client, Debian's curl: TLS 1.3 and 1.2,
//! HTTP/2 by ALPN and h2c by prior knowledge, certificates read again without dropping
//! requests, and a stop that finishes what is in flight within its bound.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, Path as UrlPath};
use axum::routing::get;
use switchyard_gateway::listener::{Drained, ServeOptions, serve};
use switchyard_gateway::tls::{TlsError, TlsFiles};
use tokio::sync::oneshot;

/// curl is Debian's `curl` package (bench/install-peers.sh installs it); without it these
/// tests say so and pass nothing.
fn have_curl() -> bool {
    let found = Command::new("curl").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: curl is not installed (bench/install-peers.sh installs it)");
    }
    found
}

/// `/slow/MS` counts its arrivals in `arrived`, so that a test knows its requests are in flight.
fn app(arrived: Arc<AtomicUsize>) -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route(
            "/slow/{ms}",
            get(move |UrlPath(ms): UrlPath<u64>| async move {
                arrived.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                "slow"
            }),
        )
        .route("/peer", get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.ip().to_string() }))
}

/// A self-signed certificate for `localhost` and its key, written as PEM into `dir`.
fn certificate(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("a certificate is made");
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-serving-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A server on a free port, stopped by sending on the returned channel; its task answers the
/// drain's count.
struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<Drained>,
    arrived: Arc<AtomicUsize>,
}

impl Server {
    async fn start(options: ServeOptions) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel();
        let arrived = Arc::new(AtomicUsize::new(0));
        let done = tokio::spawn(serve(listener, app(arrived.clone()), options, async {
            let _ = stopped.await;
        }));
        Self { addr, stop: Some(stop), done, arrived }
    }

    /// Waits until `n` slow requests have reached the router (a minute at most: a hang fails).
    async fn arrivals(&self, n: usize) {
        let wait = async {
            while self.arrived.load(Ordering::SeqCst) < n {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait).await.expect("the requests arrive");
    }

    /// Stops it and waits for the drain, at most a minute (a hang fails the test).
    async fn stop(mut self) -> Drained {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(60), self.done).await.expect("the drain ends").unwrap()
    }

    fn https(&self, path: &str) -> Vec<String> {
        let port = self.addr.port();
        vec![format!("--resolve"), format!("localhost:{port}:127.0.0.1"), format!("https://localhost:{port}{path}")]
    }

    fn http(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// What curl said: its exit status, standard output and standard error.
struct Said {
    ok: bool,
    out: String,
    err: String,
}

async fn curl(args: Vec<String>) -> Said {
    tokio::task::spawn_blocking(move || {
        let o = Command::new("curl")
            .args(["--silent", "--show-error", "--max-time", "60"])
            .args(&args)
            .output()
            .expect("curl runs");
        Said {
            ok: o.status.success(),
            out: String::from_utf8_lossy(&o.stdout).into_owned(),
            err: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

fn args(list: &[&str], rest: Vec<String>) -> Vec<String> {
    list.iter().map(|s| (*s).to_string()).chain(rest).collect()
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn tls_options(cert: &Path, key: &Path) -> (Arc<TlsFiles>, ServeOptions) {
    let files = TlsFiles::load(cert, key).expect("the certificate loads");
    (files.clone(), ServeOptions { tls: Some(files), ..ServeOptions::default() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_1_3_and_1_2_with_http2_by_alpn_and_http1_1() {
    if !have_curl() {
        return;
    }
    let dir = scratch("versions");
    let (cert, key) = certificate(&dir, "a");
    let (_, options) = tls_options(&cert, &key);
    let server = Server::start(options).await;
    let ca = path(&cert);
    for (flags, version, http) in [
        (vec!["--tlsv1.3", "--http2"], "TLSv1.3", "2"),
        (vec!["--tlsv1.3", "--http1.1"], "TLSv1.3", "1.1"),
        (vec!["--tlsv1.2", "--tls-max", "1.2", "--http2"], "TLSv1.2", "2"),
        (vec!["--tlsv1.2", "--tls-max", "1.2", "--http1.1"], "TLSv1.2", "1.1"),
    ] {
        let mut list = flags.clone();
        list.extend(["--verbose", "--cacert", &ca, "--write-out", " %{http_version}"]);
        let said = curl(args(&list, server.https("/"))).await;
        assert!(said.ok, "curl {flags:?} failed: {}", said.err);
        assert_eq!(said.out, format!("hello {http}"), "curl {flags:?}");
        assert!(said.err.contains(&format!("SSL connection using {version}")), "curl {flags:?}: {}", said.err);
    }
    assert_eq!(server.stop().await, Drained { finished: 0, cut: 0 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_by_prior_knowledge_only_when_asked_for() {
    if !have_curl() {
        return;
    }
    let h2c = Server::start(ServeOptions { h2c: true, ..ServeOptions::default() }).await;
    let said = curl(args(&["--http2-prior-knowledge", "--write-out", " %{http_version}"], vec![h2c.http("/")])).await;
    assert!(said.ok, "{}", said.err);
    assert_eq!(said.out, "hello 2");
    let said = curl(args(&["--write-out", " %{http_version}"], vec![h2c.http("/")])).await;
    assert_eq!(said.out, "hello 1.1", "HTTP/1.1 beside h2c: {}", said.err);
    h2c.stop().await;

    let plain = Server::start(ServeOptions::default()).await;
    let said = curl(args(&["--http2-prior-knowledge"], vec![plain.http("/")])).await;
    assert!(!said.ok, "h2c answered without --h2c: {}", said.out);
    let said = curl(args(&["--write-out", " %{http_version}"], vec![plain.http("/")])).await;
    assert_eq!(said.out, "hello 1.1", "{}", said.err);
    plain.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_sees_the_client_address() {
    if !have_curl() {
        return;
    }
    let dir = scratch("peer");
    let (cert, key) = certificate(&dir, "a");
    let (_, options) = tls_options(&cert, &key);
    let server = Server::start(options).await;
    let said = curl(args(&["--cacert", &path(&cert)], server.https("/peer"))).await;
    assert_eq!(said.out, "127.0.0.1", "{}", said.err);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_serves_the_new_certificate_to_new_connections_only() {
    if !have_curl() {
        return;
    }
    let dir = scratch("reload");
    let (cert, key) = certificate(&dir, "live");
    let old_ca = dir.join("old.crt");
    std::fs::copy(&cert, &old_ca).unwrap();
    let (files, options) = tls_options(&cert, &key);
    let server = Server::start(options).await;
    // A request under way over the old certificate when the files change.
    let slow = tokio::spawn(curl(args(&["--cacert", &path(&old_ca)], server.https("/slow/1500"))));
    server.arrivals(1).await;
    let (new_cert, new_key) = certificate(&dir, "new");
    std::fs::copy(&new_cert, &cert).unwrap();
    std::fs::copy(&new_key, &key).unwrap();
    files.reload().expect("the new files load");
    let said = curl(args(&["--cacert", &path(&new_cert)], server.https("/"))).await;
    assert_eq!(said.out, "hello", "the new certificate: {}", said.err);
    let said = curl(args(&["--cacert", &path(&old_ca)], server.https("/"))).await;
    assert!(!said.ok, "the old certificate is still served to new connections");
    let said = slow.await.unwrap();
    assert_eq!(said.out, "slow", "the request under way at the reload: {}", said.err);
    assert_eq!(server.stop().await, Drained { finished: 0, cut: 0 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_refuses_bad_files_saying_why_and_keeps_serving_the_old() {
    if !have_curl() {
        return;
    }
    let dir = scratch("bad");
    let (cert, key) = certificate(&dir, "live");
    let ca = dir.join("ca.crt");
    std::fs::copy(&cert, &ca).unwrap();
    let (files, options) = tls_options(&cert, &key);
    let server = Server::start(options).await;

    std::fs::write(&cert, "not a certificate\n").unwrap();
    let e = files.reload().expect_err("a file without a certificate");
    assert!(matches!(e, TlsError::Cert { .. }), "{e:?}");
    let said = e.to_string();
    assert!(said.contains(&path(&cert)) && said.contains("no certificate in it"), "{said}");

    // A certificate with another certificate's key.
    std::fs::copy(&ca, &cert).unwrap();
    let (_, other_key) = certificate(&dir, "other");
    std::fs::copy(&other_key, &key).unwrap();
    let e = files.reload().expect_err("a key that is not the certificate's");
    assert!(matches!(e, TlsError::Pair { .. }), "{e:?}");
    assert!(e.to_string().contains("do not go together"), "{e}");

    std::fs::remove_file(&key).unwrap();
    let e = files.reload().expect_err("no key file");
    assert!(e.to_string().starts_with(&format!("TLS key {} (--tls-key): cannot be read", path(&key))), "{e}");

    let said = curl(args(&["--cacert", &path(&ca)], server.https("/"))).await;
    assert_eq!(said.out, "hello", "the old certificate after refused reloads: {}", said.err);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_under_load_drop_no_request() {
    if !have_curl() {
        return;
    }
    let dir = scratch("load");
    let (a_cert, a_key) = certificate(&dir, "a");
    let (b_cert, b_key) = certificate(&dir, "b");
    let bundle = dir.join("both.crt");
    std::fs::write(&bundle, std::fs::read_to_string(&a_cert).unwrap() + &std::fs::read_to_string(&b_cert).unwrap())
        .unwrap();
    let (cert, key) = (dir.join("live.crt"), dir.join("live.key"));
    std::fs::copy(&a_cert, &cert).unwrap();
    std::fs::copy(&a_key, &key).unwrap();
    let (files, options) = tls_options(&cert, &key);
    let server = Server::start(options).await;

    // 400 requests, 8 at a time, half on connections of their own (so that new handshakes
    // meet the reloads), half over HTTP/2.
    const N: usize = 400;
    let mut jobs = Vec::new();
    for (i, flags) in [vec!["--http1.1", "--header", "Connection: close"], vec!["--http2"]].into_iter().enumerate() {
        let mut list: Vec<String> = flags.iter().map(|s| (*s).to_string()).collect();
        list.extend(["--cacert".into(), path(&bundle), "--parallel".into(), "--parallel-max".into(), "4".into()]);
        list.push("--no-progress-meter".into());
        let port = server.addr.port();
        list.extend(["--resolve".into(), format!("localhost:{port}:127.0.0.1")]);
        for _ in 0..N / 2 {
            list.extend(["--write-out".into(), "%{http_code}\\n".into(), "--output".into(), "/dev/null".into()]);
            list.push(format!("https://localhost:{port}/slow/{}", i * 5));
        }
        jobs.push(tokio::spawn(curl(list)));
    }
    let mut reloads = 0;
    while !jobs.iter().all(tokio::task::JoinHandle::is_finished) {
        let (c, k) = if reloads % 2 == 0 { (&b_cert, &b_key) } else { (&a_cert, &a_key) };
        // Written in place, as an operator's renewal does; a reload that meets a half-written
        // file is refused and the old acceptor serves on.
        std::fs::copy(c, &cert).unwrap();
        std::fs::copy(k, &key).unwrap();
        if files.reload().is_ok() {
            reloads += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (mut ok, mut errors) = (0, String::new());
    for job in jobs {
        let said = job.await.unwrap();
        errors += &said.err;
        ok += said.out.lines().filter(|l| *l == "200").count();
    }
    assert!(errors.is_empty(), "curl: {errors}");
    assert!(reloads >= 5, "only {reloads} reloads happened during the load");
    assert_eq!(ok, N, "answers with 200 of {N} requests across {reloads} reloads");
    assert_eq!(server.stop().await, Drained { finished: 0, cut: 0 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_finishes_requests_in_flight_and_refuses_new_connections() {
    if !have_curl() {
        return;
    }
    let dir = scratch("drain");
    let (cert, key) = certificate(&dir, "a");
    let (files, _) = tls_options(&cert, &key);
    let server = Server::start(ServeOptions {
        tls: Some(files),
        drain_timeout: Duration::from_secs(30),
        ..ServeOptions::default()
    })
    .await;
    let ca = path(&cert);
    let mut slow = Vec::new();
    // HTTP/1.1 and HTTP/2 over TLS.
    for flags in [vec!["--http1.1"], vec!["--http2"]] {
        let mut list = flags.clone();
        list.extend(["--cacert", &ca]);
        slow.push(tokio::spawn(curl(args(&list, server.https("/slow/1500")))));
    }
    // A connection a client opened and left idle must not hold the stop up.
    let idle = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    server.arrivals(2).await;
    let addr = server.addr;
    let drained = server.stop().await;
    for job in slow {
        let said = job.await.unwrap();
        assert_eq!(said.out, "slow", "a request in flight at the stop: {}", said.err);
    }
    assert_eq!(drained, Drained { finished: 2, cut: 0 });
    drop(idle);
    let said = curl(vec![format!("http://{addr}/")]).await;
    assert!(!said.ok && said.err.contains("onnect"), "a connection after the stop: {} {}", said.out, said.err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_cuts_what_outlasts_the_drain_timeout() {
    if !have_curl() {
        return;
    }
    let server =
        Server::start(ServeOptions { drain_timeout: Duration::from_millis(300), ..ServeOptions::default() }).await;
    let slow = tokio::spawn(curl(vec![server.http("/slow/60000")]));
    server.arrivals(1).await;
    let quick = tokio::spawn(curl(vec![server.http("/slow/100")]));
    server.arrivals(2).await;
    let drained = server.stop().await;
    assert_eq!(drained, Drained { finished: 1, cut: 1 });
    assert_eq!(quick.await.unwrap().out, "slow");
    let said = slow.await.unwrap();
    assert!(!said.ok, "the request cut short was answered: {}", said.out);
}
