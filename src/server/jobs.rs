//! Long builds as jobs: `POST /v1/namespaces/{ns}/build` starts one on a thread of its own and
//! answers at once (202) with its id; `GET /v1/jobs/{id}` tells its stage (as the build tells
//! it: loading, embedding, folding, pages, committing, vectors), the texts embedded of those to
//! embed, the messages folded of those to fold, the time taken, and at the end its build report
//! or its error. A job holds
//! its namespace's writer lock, so appends to that namespace wait for it, and a second build of
//! the namespace is refused (409, naming the running job) while it runs. Finished jobs are kept
//! for reading, the last [`KEPT_JOBS`] of them.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use trajwiki_core::Namespace;

use super::extract::{Body, Id, IdParam, Ns, NsParam};
use super::{lock, AppState, Code, Failure};
use crate::engine::build_config;
use crate::pipeline::{BuildOptions, Progress, Stage};

/// Finished jobs kept for reading.
pub(super) const KEPT_JOBS: usize = 100;

/// The jobs a server knows.
#[derive(Default)]
pub(super) struct Jobs {
    by_id: HashMap<String, Arc<Job>>,
    /// Finished jobs, oldest first.
    finished: VecDeque<String>,
    next: u64,
}

/// One build job.
pub(super) struct Job {
    id: String,
    namespace: Namespace,
    started: Instant,
    embedded: AtomicUsize,
    to_embed: AtomicUsize,
    folded: AtomicUsize,
    to_fold: AtomicUsize,
    state: Mutex<JobState>,
}

enum JobState {
    Waiting,
    Running(Stage),
    Done { report: Value, ms: u128 },
    Failed { error: Failure, ms: u128 },
}

impl Job {
    fn json(&self) -> Value {
        let (status, stage) = match &*lock(&self.state) {
            JobState::Waiting => ("running", "waiting"),
            JobState::Running(stage) => ("running", stage.name()),
            JobState::Done { .. } => ("done", "done"),
            JobState::Failed { .. } => ("failed", "failed"),
        };
        let mut value = json!({
            "job": self.id, "namespace": self.namespace, "status": status, "stage": stage,
            "embedded": self.embedded.load(Ordering::Relaxed),
            "to_embed": self.to_embed.load(Ordering::Relaxed),
            "folded": self.folded.load(Ordering::Relaxed),
            "to_fold": self.to_fold.load(Ordering::Relaxed),
            "elapsed_ms": self.started.elapsed().as_millis() as u64,
        });
        match &*lock(&self.state) {
            JobState::Done { report, ms } => {
                value["report"] = report.clone();
                value["elapsed_ms"] = json!(*ms as u64);
            }
            JobState::Failed { error, ms } => {
                value["error"] = json!({"code": error.code, "message": error.message});
                value["elapsed_ms"] = json!(*ms as u64);
            }
            _ => {}
        }
        value
    }

    fn running(&self) -> bool {
        !matches!(
            &*lock(&self.state),
            JobState::Done { .. } | JobState::Failed { .. }
        )
    }

    fn set(&self, state: JobState) {
        *lock(&self.state) = state;
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BuildRequest {
    /// Build from the messages, not from the kept state.
    #[serde(default)]
    rebuild: bool,
    /// Write the index segment through at once.
    #[serde(default)]
    flush: bool,
}

/// Builds the namespace as a job (202 with its id; 409 while one runs).
#[utoipa::path(post, path = "/namespaces/{ns}/build", tag = "memory", params(NsParam),
    request_body = BuildRequest,
    responses((status = 202, description = "The build's job: `{job, namespace, status}`; 409 while one runs")))]
pub(super) async fn start_build(
    State(state): State<Arc<AppState>>,
    Ns(ns): Ns,
    // A JSON object is required (`{}` for the defaults), as on every route that writes: a
    // page of another site cannot send one without a CORS preflight.
    Body(req): Body<BuildRequest>,
) -> Result<(StatusCode, Json<Value>), Failure> {
    let job = {
        let mut jobs = lock(&state.jobs);
        if let Some(running) = jobs
            .by_id
            .values()
            .find(|j| j.namespace == ns && j.running())
        {
            return Err(Failure::new(
                StatusCode::CONFLICT,
                Code::Busy,
                format!("a build of {ns} is running: job {}", running.id),
            ));
        }
        jobs.next += 1;
        let job = Arc::new(Job {
            id: format!("job_{}", jobs.next),
            namespace: ns.clone(),
            started: Instant::now(),
            embedded: AtomicUsize::new(0),
            to_embed: AtomicUsize::new(0),
            folded: AtomicUsize::new(0),
            to_fold: AtomicUsize::new(0),
            state: Mutex::new(JobState::Waiting),
        });
        jobs.by_id.insert(job.id.clone(), Arc::clone(&job));
        job
    };
    let answer = job.json();
    let worker = Arc::clone(&state);
    std::thread::Builder::new()
        .name(format!("trajwiki-{}", job.id))
        .spawn(move || {
            let outcome = run(&worker, &job, &req);
            let ms = job.started.elapsed().as_millis();
            job.set(match outcome {
                Ok(report) => JobState::Done { report, ms },
                Err(error) => JobState::Failed {
                    error: worker.public(error),
                    ms,
                },
            });
            let mut jobs = lock(&worker.jobs);
            jobs.finished.push_back(job.id.clone());
            while jobs.finished.len() > KEPT_JOBS {
                if let Some(old) = jobs.finished.pop_front() {
                    jobs.by_id.remove(&old);
                }
            }
        })
        .map_err(|e| Failure::internal(format!("starting the build job: {e}")))?;
    Ok((StatusCode::ACCEPTED, Json(answer)))
}

/// The job's work: the namespace's messages embedded into the cache (progress counted), then
/// the fold, from the namespace's kept construction state.
fn run(state: &AppState, job: &Job, req: &BuildRequest) -> Result<Value, Failure> {
    let ns = &job.namespace;
    let mut store = state.engine.connect()?;
    let handle = state.engine.namespace(ns);
    handle.with_messages(&store)?;
    let mut writer = handle.writer();
    let progress = |p: Progress| {
        let counts = match p.stage {
            Stage::Embedding => Some((&job.embedded, &job.to_embed)),
            Stage::Folding => Some((&job.folded, &job.to_fold)),
            _ => None,
        };
        if let Some((done, total)) = counts {
            done.store(p.done, Ordering::Relaxed);
            total.store(p.total, Ordering::Relaxed);
        }
        job.set(JobState::Running(p.stage));
    };
    let config = build_config(&store, ns)?;
    let options = BuildOptions {
        rebuild: req.rebuild,
        flush: req.flush,
        ..BuildOptions::default()
    };
    let report = writer.build_told(&mut store, &config, options, Some(&progress))?;
    serde_json::to_value(&report)
        .map_err(|e| Failure::internal(format!("serializing the build report: {e}")))
}

/// A build job: its stage and progress, then its report or error.
#[utoipa::path(get, path = "/jobs/{id}", tag = "memory", params(IdParam),
    responses((status = 200, description = "A build job: its stage (waiting, loading, embedding, folding, pages, committing, vectors, done, failed), texts embedded of those to embed, messages folded of those to fold, elapsed time, then its report or error")))]
pub(super) async fn job(
    State(state): State<Arc<AppState>>,
    Id(id): Id,
) -> Result<Json<Value>, Failure> {
    let job = lock(&state.jobs).by_id.get(&id).cloned();
    match job {
        Some(job) => Ok(Json(job.json())),
        None => Err(Failure::new(
            StatusCode::NOT_FOUND,
            Code::NotFound,
            format!("no job {id:?} (finished jobs are kept, the last {KEPT_JOBS})"),
        )),
    }
}
