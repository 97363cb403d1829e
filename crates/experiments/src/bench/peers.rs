//! The benchmarks' outside peers: finding nginx, Varnish and wrk (Debian's, from
//! `bench/install-peers.sh`), and launching nginx or Varnish on loopback with a configuration
//! written for one run, stopped when its handle is dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// A child process stopped when dropped, so an error leaves no nginx behind. nginx's master is
/// asked to stop (SIGTERM), which stops its workers too; killing the master outright would
/// leave them running.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).is_err() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Where `program` is: on `PATH`, or in the system folders Debian puts servers in.
pub fn found(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// A loopback port free at the moment of asking.
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The `user` line nginx needs when started as root (its workers would otherwise drop to
/// `nobody`, who cannot read the run's folder).
pub(crate) fn user_line() -> &'static str {
    if nix::unistd::geteuid().is_root() { "user root;\n" } else { "" }
}

/// Starts nginx with `conf` (written to `dir`), and waits until it listens on loopback `port`.
pub fn launch_nginx(nginx: &Path, dir: &Path, conf: &str, port: u16) -> Result<(Reaped, SocketAddr)> {
    std::fs::write(dir.join("nginx.conf"), conf)?;
    let child = Command::new(nginx)
        .args(["-p", &dir.display().to_string(), "-c", &dir.join("nginx.conf").display().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", nginx.display()))?;
    let child = Reaped(child);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let t = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        if t.elapsed() > Duration::from_secs(5) {
            let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
            bail!("nginx did not start listening on {addr} within 5 s; its error log:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((child, addr))
}

/// nginx as a caching proxy in front of `origin`, its files in `dir`: the cache zone `cache`,
/// its `proxy_cache_path` line ending with `cache_path` (size, lifetime), and `location`'s
/// directives added to the proxied location. Waits until it listens on loopback.
pub fn launch_nginx_cache(
    nginx: &Path,
    dir: &Path,
    origin: SocketAddr,
    cache_path: &str,
    location: &str,
) -> Result<(Reaped, SocketAddr)> {
    nginx_cache(nginx, dir, origin, cache_path, location, None)
}

/// [`launch_nginx_cache`] serving HTTPS with this certificate and key (PEM): TLS 1.3 and 1.2,
/// HTTP/2 and HTTP/1.1 by ALPN (nginx 1.22's `listen … ssl http2`).
pub fn launch_nginx_cache_tls(
    nginx: &Path,
    dir: &Path,
    origin: SocketAddr,
    cache_path: &str,
    location: &str,
    cert_key: (&Path, &Path),
) -> Result<(Reaped, SocketAddr)> {
    nginx_cache(nginx, dir, origin, cache_path, location, Some(cert_key))
}

fn nginx_cache(
    nginx: &Path,
    dir: &Path,
    origin: SocketAddr,
    cache_path: &str,
    location: &str,
    tls: Option<(&Path, &Path)>,
) -> Result<(Reaped, SocketAddr)> {
    std::fs::create_dir_all(dir.join("cache"))?;
    // A session cache as a site has one; it matters only to clients that reconnect, which
    // the benches' do not. nginx ends a connection after 1,000 requests by default (HTTP/2's
    // too): h2load does not open another, so that would end the load, and a new handshake
    // every 1,000 hits is a cost ours does not pay.
    let (listen, tls) = match tls {
        Some((cert, key)) => (
            " ssl http2",
            format!(
                "    ssl_certificate {};\n    ssl_certificate_key {};\n    ssl_protocols TLSv1.2 TLSv1.3;\n\
                     ssl_session_cache shared:tls:1m;\n    keepalive_requests 1000000000;\n",
                cert.display(),
                key.display()
            ),
        ),
        None => ("", String::new()),
    };
    let port = free_port()?;
    let conf = format!(
        "daemon off;\nworker_processes auto;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n{user}\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
           fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
           proxy_cache_path {d}/cache keys_zone=cache:16m levels=1:2 {cache_path};\n\
           upstream origin {{ server {origin}; keepalive 64; }}\n\
           server {{\n    listen 127.0.0.1:{port}{listen};\n{tls}    location / {{\n      proxy_pass http://origin;\n\
               proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n      proxy_cache cache;\n\
               {location}\n    }}\n  }}\n}}\n",
        d = dir.display(),
        user = user_line(),
    );
    launch_nginx(nginx, dir, &conf, port)
}

/// Waits until something listens on loopback `port`, for at most `within`.
pub fn listening(port: u16, what: &str, within: Duration) -> Result<SocketAddr> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let t = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        if t.elapsed() > within {
            bail!("{what} did not start listening on {addr} within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(addr)
}

/// Starts Varnish (`varnishd`, Debian's 7.1) in front of `origin` with its built-in VCL,
/// storing up to `mib` MiB in memory (`-s malloc`), its working files in `dir`, with the
/// parameters `params` (`-p NAME=VALUE`) and, where given, `default_ttl` seconds for answers
/// that state no freshness (`-t`); waits until it listens on loopback.
pub fn launch_varnish(
    varnishd: &Path,
    dir: &Path,
    origin: SocketAddr,
    mib: u64,
    default_ttl: Option<u64>,
    params: &[&str],
) -> Result<(Reaped, SocketAddr)> {
    std::fs::create_dir_all(dir)?;
    let port = free_port()?;
    let mut command = Command::new(varnishd);
    command
        .args(["-F", "-n", &dir.display().to_string(), "-a", &format!("127.0.0.1:{port}")])
        .args(["-b", &origin.to_string(), "-s", &format!("malloc,{mib}m")])
        // One run's instance, whoever runs it: no jail to switch users into.
        .args(["-j", "none"]);
    if let Some(ttl) = default_ttl {
        command.args(["-t", &ttl.to_string()]);
    }
    for p in params {
        command.args(["-p", p]);
    }
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", varnishd.display()))?;
    let child = Reaped(child);
    let addr = listening(port, "varnishd", Duration::from_secs(10))?;
    Ok((child, addr))
}
