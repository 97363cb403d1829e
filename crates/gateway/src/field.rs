//! The sensor-field emulator: the field model the simulator also runs (`switchyard-models`)
//! served over HTTP in real time, with
//! the model's access links, delays and costs (Yates §5.3), for the gateway to be run and
//! measured against.
//!
//! - `GET /v1/field`: the locations, base stations and neighbourhoods (what a gateway needs
//!   for approximate answers).
//! - `GET /v1/sensors/{location}`: a read. It waits its turn on the location's base-station
//!   link (refused with 503 past the longest wait), travels q·r to the sensor, which samples
//!   its value then, and q·r back; the answer carries the value, when it was sensed and what
//!   the read cost (Eq 5.5).
//! - `GET /v1/truth/{location}`: the true value now, free and at once (for measuring
//!   deviation; no real field has one).
//! - `GET /metrics`: reads, cost and refusals, in Prometheus text.
//!
//! Model seconds run `time_scale` times as fast as wall seconds (0.01: a hundred times as
//! fast), so tests and demos need not wait for a 2 s round trip. Values change lazily: each
//! request first applies every change due by now.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use switchyard_core::Nanos;
use switchyard_core::cache::{FieldCost, Neighbourhood};
use switchyard_models::{AccessLinks, Field, FieldSpec};

use crate::http::{error, unix_ms};
use crate::metrics::{Amount, Count, Metrics};

/// How the emulator runs.
#[derive(Clone, Debug)]
pub struct FieldConfig {
    /// The field.
    pub spec: FieldSpec,
    /// Seed of the field's first values and changes.
    pub seed: u64,
    /// Wall seconds per model second.
    pub time_scale: f64,
    /// Queries a second each base station's link takes.
    pub link_capacity: f64,
    /// The longest a read may wait for its link, model seconds.
    pub max_wait_s: f64,
}

/// What `GET /v1/field` answers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FieldInfo {
    /// Each location's coordinates.
    pub locations: Vec<[f64; 3]>,
    /// The base stations' coordinates.
    pub stations: Vec<[f64; 3]>,
    /// Each location's neighbours, nearest first, with distances.
    pub neighbours: Vec<Vec<(u32, f64)>>,
}

/// What a read answers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SensorReading {
    /// The location read.
    pub location: u32,
    /// Its value when the query reached it.
    pub value: f64,
    /// When that was, in milliseconds since the Unix epoch.
    pub sensed_at_ms: f64,
    /// What the read cost (a query and a reply, Eq 5.5).
    pub cost: f64,
    /// How long it took, model seconds: the wait for the link and the round trip.
    pub delay_s: f64,
}

/// An error body: what went wrong, in a sentence.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The sentence.
    pub error: String,
}

struct Live {
    field: Field,
    rng: ChaCha8Rng,
    /// The base stations' links, in model time.
    links: AccessLinks,
}

struct Shared {
    live: Mutex<Live>,
    cost: FieldCost,
    info: FieldInfo,
    config: FieldConfig,
    start: Instant,
    metrics: Metrics,
    reads: Count,
    refused: Count,
    cost_total: Amount,
}

/// Why the emulator cannot start.
#[derive(Debug, thiserror::Error)]
pub enum FieldError {
    /// The field cannot be built.
    #[error("field: {0}")]
    Field(String),
    /// A setting is out of range.
    #[error("{0}")]
    Config(String),
}

impl Shared {
    fn model_s(&self, at: Instant) -> f64 {
        at.duration_since(self.start).as_secs_f64() / self.config.time_scale
    }

    fn wall(&self, model_s: f64) -> Duration {
        Duration::try_from_secs_f64(model_s * self.config.time_scale).unwrap_or(Duration::MAX)
    }

    /// Applies every change due by now; returns the live field.
    ///
    /// At most [`CATCH_UP`] changes are made at once: after a long idle spell the field is as
    /// changed as it gets long before every change due has been made (each location has been
    /// redrawn many times), and making them all would hold the lock for seconds.
    fn catch_up(&self) -> std::sync::MutexGuard<'_, Live> {
        let mut live = self.live.lock().expect("no request panics holding the field");
        let now = self.model_s(Instant::now());
        let Live { field, rng, .. } = &mut *live;
        let mut made = 0;
        while field.next_change_s() <= now && made < CATCH_UP {
            field.change(rng);
            made += 1;
        }
        live
    }
}

/// The most changes one request makes the field catch up on (see `Shared::catch_up`).
const CATCH_UP: usize = 20_000;

/// A running field, to be served over HTTP ([`FieldService::router`]) and UDP ([`serve_udp`])
/// at once.
#[derive(Clone)]
pub struct FieldService(Arc<Shared>);

/// The emulator's HTTP routes, for a field served over HTTP only.
pub fn router(config: FieldConfig) -> Result<Router, FieldError> {
    Ok(FieldService::new(config)?.router())
}

impl FieldService {
    /// The HTTP routes.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/v1/field", get(|State(s): State<Arc<Shared>>| async move { Json(s.info.clone()) }))
            .route("/v1/sensors/{location}", get(read))
            .route("/v1/truth/{location}", get(truth))
            .route("/metrics", get(|State(s): State<Arc<Shared>>| async move { s.metrics.render() }))
            .with_state(Arc::clone(&self.0))
    }

    /// The field `config` describes, its clock started.
    pub fn new(config: FieldConfig) -> Result<Self, FieldError> {
        if !(config.time_scale.is_finite() && config.time_scale > 0.0) {
            return Err(FieldError::Config(format!(
                "time scale {}: give a positive number (1 is real time)",
                config.time_scale
            )));
        }
        if !(config.link_capacity.is_finite() && config.link_capacity > 0.0) {
            return Err(FieldError::Config(format!(
                "link capacity {}: give a positive number of queries a second",
                config.link_capacity
            )));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let field = Field::new(&config.spec, &mut rng).map_err(FieldError::Field)?;
        let cost = FieldCost::new(field.points(), field.stations())
            .ok_or_else(|| FieldError::Field("a location sits on a base station".into()))?;
        let info = FieldInfo {
            locations: field.points().to_vec(),
            stations: field.stations().to_vec(),
            neighbours: (0..field.points().len() as u32).map(|l| field.neighbours().of(&l).to_vec()).collect(),
        };
        let start = Instant::now();
        let mut metrics = Metrics::default();
        let reads = metrics.count("field_reads", "Reads answered.");
        let refused = metrics.count("field_refused", "Reads refused: their link's queue was past its longest wait.");
        let cost_total = metrics.amount("field_cost", "Cost of the reads answered (Yates Eq 5.5 units).");
        let shared = Arc::new(Shared {
            live: Mutex::new(Live {
                links: AccessLinks::new(
                    field.stations().len(),
                    Nanos((1e9 / config.link_capacity) as u64),
                    Nanos((config.max_wait_s * 1e9) as u64),
                ),
                field,
                rng,
            }),
            cost,
            info,
            config,
            start,
            metrics,
            reads,
            refused,
            cost_total,
        });
        Ok(Self(shared))
    }
}

/// The location `raw` names, or the 404 that says which there are.
fn location(s: &Shared, raw: &str) -> Result<u32, String> {
    crate::http::location(raw, s.info.locations.len())
}

/// One read of the field: the link's queue, the trip out, the sample, the trip back.
async fn sense(s: &Shared, raw: &str) -> Result<SensorReading, (StatusCode, String)> {
    let l = location(s, raw).map_err(|why| (StatusCode::NOT_FOUND, why))?;
    let station = s.cost.station(l);
    let now = Instant::now();
    let wait = {
        let mut live = s.live.lock().expect("no request panics holding the field");
        let model_now = Nanos((s.model_s(now) * 1e9) as u64);
        match live.links.admit(station, model_now) {
            Ok(wait) => s.wall(wait.0 as f64 / 1e9),
            Err(wait) => {
                s.refused.inc();
                return Err((
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "the link to base station {station} is full: a query would wait {:.2} s, longer than the {} s limit",
                        wait.0 as f64 / 1e9,
                        s.config.max_wait_s
                    ),
                ));
            }
        }
    };
    let one_way = s.wall(s.cost.one_way_delay_s(l));
    tokio::time::sleep(wait + one_way).await;
    let (value, sensed_at_ms) = (s.catch_up().field.values()[l as usize], unix_ms());
    tokio::time::sleep(one_way).await;
    let cost = s.cost.read_cost(l);
    s.reads.inc();
    s.cost_total.inc_by(cost);
    let delay_s = s.model_s(Instant::now()) - s.model_s(now);
    Ok(SensorReading { location: l, value, sensed_at_ms, cost, delay_s })
}

async fn read(State(s): State<Arc<Shared>>, Path(raw): Path<String>) -> Response {
    match sense(&s, &raw).await {
        Ok(r) => Json(r).into_response(),
        Err((status, why)) => error(status, why),
    }
}

/// Answers reads over UDP on `socket` until it fails: a datagram `read LOCATION` is answered
/// with one datagram, the JSON a `GET /v1/sensors/LOCATION` would give (or `{"error": …}`).
/// Reads run side by side, each as long as the model says.
pub async fn serve_udp(service: &FieldService, socket: tokio::net::UdpSocket) -> std::io::Result<()> {
    let socket = Arc::new(socket);
    let mut buf = [0u8; 512];
    loop {
        let (n, from) = socket.recv_from(&mut buf).await?;
        let text = String::from_utf8_lossy(&buf[..n]).trim().to_string();
        let (s, socket) = (Arc::clone(&service.0), Arc::clone(&socket));
        tokio::spawn(async move {
            let reply = match text.strip_prefix("read ") {
                Some(raw) => match sense(&s, raw.trim()).await {
                    Ok(r) => serde_json::to_vec(&r),
                    Err((_, why)) => serde_json::to_vec(&ErrorBody { error: why }),
                },
                None => serde_json::to_vec(&ErrorBody {
                    error: format!("`{}`: send `read LOCATION`", text.chars().take(40).collect::<String>()),
                }),
            };
            if let Ok(bytes) = reply {
                let _ = socket.send_to(&bytes, from).await;
            }
        });
    }
}

async fn truth(State(s): State<Arc<Shared>>, Path(raw): Path<String>) -> Response {
    match location(&s, &raw) {
        Ok(l) => Json(s.catch_up().field.values()[l as usize]).into_response(),
        Err(why) => error(StatusCode::NOT_FOUND, why),
    }
}
