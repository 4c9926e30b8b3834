//! The two gRPC services: thin adapters from RPCs to scheduler events.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use farm_proto::{
    AgentMessage, CancelMatrixRequest, CancelMatrixResponse, CancelScheduleRequest,
    CancelScheduleResponse, CoordinatorMessage, GetMatrixRequest, GetResultsRequest,
    GetResultsResponse, ListAgentsRequest, ListAgentsResponse, ListSchedulesRequest,
    ListSchedulesResponse, MatrixState, MatrixStatus, RegisterRequest, RegisterResponse,
    SubmitMatrixRequest, SubmitMatrixResponse, WatchMatrixRequest, agent_message,
    agent_service_server::AgentService, farm_service_server::FarmService,
};
use tokio::sync::{Semaphore, mpsc};
use tokio_stream::{Stream, StreamExt, wrappers::ReceiverStream};
use tonic::{Request, Response, Status, Streaming};
use tracing::debug;

use crate::archive;
use crate::identity::{Name, Principal};
use crate::ids::{AgentId, BisectionId, MatrixId, ScheduleId};
use crate::matrix;
use crate::route::Router;
use crate::scheduler::{self, BisectionEvent, Event, ResultsEvent, ScheduleEvent};

/// The largest matrix file accepted; a real one is a few KiB.
pub const MAX_MATRIX_BYTES: usize = 1 << 20;

/// The longest file name a submission may carry; it is named in errors.
pub const MAX_FILE_NAME_BYTES: usize = 4096;
/// The longest message a status carries. grpc-core clients refuse
/// trailers over 16 KiB (and then show only RESOURCE_EXHAUSTED), so an
/// error that quotes much of a bad input is cut well below that.
pub const MAX_STATUS_MESSAGE_BYTES: usize = 4096;

/// `bytes` that must be UTF-8 (`what` names them in the error, with the
/// offset of the first bad byte), at most `limit` long.
fn utf8(what: &str, bytes: Vec<u8>, limit: usize) -> Result<String, Status> {
    if bytes.len() > limit {
        return Err(Status::invalid_argument(format!(
            "{what} is {} bytes; the limit is {limit}",
            bytes.len()
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        Status::invalid_argument(format!(
            "{what}: not UTF-8 (byte {} is not part of a UTF-8 character)",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// A status whose message is cut to [`MAX_STATUS_MESSAGE_BYTES`].
fn bounded(make: fn(String) -> Status, message: String) -> Status {
    make(cut(message))
}

/// `message` cut to [`MAX_STATUS_MESSAGE_BYTES`] at a character boundary,
/// saying so.
fn cut(mut message: String) -> String {
    if message.len() > MAX_STATUS_MESSAGE_BYTES {
        let mut end = MAX_STATUS_MESSAGE_BYTES - 64;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let total = message.len();
        message.truncate(end);
        message.push_str(&format!("… (cut; the message was {total} bytes)"));
    }
    message
}

/// The gRPC status of each refusal of the scheduler: the only place where
/// its errors become what clients see (codes and messages are part of the
/// interface: `farmctl` and its tests read them).
impl From<scheduler::Error> for Status {
    fn from(e: scheduler::Error) -> Status {
        use scheduler::Error as E;
        // Ids in these messages come from callers, and may be long.
        let message = cut(e.to_string());
        match e {
            E::UnknownMatrix(_)
            | E::UnknownSchedule(_)
            | E::UnknownAgent(_)
            | E::UnknownBisection(_) => Status::not_found(message),
            E::Bisection(_) | E::Range(_) => Status::invalid_argument(message),
            E::AgentInUse(_) => Status::failed_precondition(message),
            E::Unreadable { .. } => Status::data_loss(message),
            E::NotYourAgent { .. } => Status::permission_denied(message),
            E::LeaseExpired
            | E::Busy { .. }
            | E::ShuttingDown
            | E::Stopped(_)
            | E::Unanswered(_) => Status::unavailable(message),
            E::TooSlow(_) => Status::resource_exhausted(message),
            E::TooLargeForStore { .. } => Status::invalid_argument(message),
            E::Store(_) => Status::internal(message),
        }
    }
}

/// A caller's matrix id, parsed where it enters: a string that is no
/// matrix id names no matrix, and is answered as an unknown one is, without
/// being looked up (live or archived).
fn caller_matrix(id: &str) -> Result<MatrixId, Status> {
    id.parse()
        .map_err(|_| scheduler::Error::UnknownMatrix(id.to_owned()).into())
}

/// The certificate name an agent's request came with (mutual TLS), put
/// there by the access check; `None` over plaintext with a token.
fn agent_identity<T>(req: &Request<T>) -> Option<Name> {
    match req.extensions().get::<Principal>() {
        Some(Principal::Agent(name)) => Some(name.clone()),
        _ => None,
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// The most bytes of agents' messages waiting for the scheduler, over all
/// agents. A stream's reader waits for room before it passes a message on,
/// so an agent that sends faster than the scheduler handles is slowed by
/// HTTP/2 flow control instead of growing the coordinator's memory.
pub const MAX_AGENT_BYTES_IN_FLIGHT: usize = 64 << 20;
/// The unit of the in-flight budget: semaphores count in `u32`.
const IN_FLIGHT_UNIT: usize = 1024;

pub struct Agents {
    pub router: Router,
    /// Numbers each stream so that a late close of an old one is told apart.
    sessions: AtomicU64,
    /// Units of [`MAX_AGENT_BYTES_IN_FLIGHT`] not taken by waiting messages.
    in_flight: Arc<Semaphore>,
}

impl Agents {
    pub fn new(router: Router) -> Agents {
        Agents {
            router,
            sessions: AtomicU64::new(1),
            in_flight: Arc::new(Semaphore::new(MAX_AGENT_BYTES_IN_FLIGHT / IN_FLIGHT_UNIT)),
        }
    }
}

#[tonic::async_trait]
impl AgentService for Agents {
    async fn register(
        &self,
        req: Request<RegisterRequest>,
    ) -> Result<Response<RegisterResponse>, Status> {
        let identity = agent_identity(&req);
        let req = req.into_inner();
        let caps = req
            .capabilities
            .ok_or_else(|| Status::invalid_argument("register: capabilities missing"))?;
        if caps.arch.is_empty() || caps.cpus_online == 0 {
            return Err(Status::invalid_argument(
                "register: capabilities need an arch and at least one online cpu",
            ));
        }
        // An id that is none of ours is resumed as an unknown one is: the
        // caller gets a new id.
        let resume = req.resume_agent_id.parse::<AgentId>().ok();
        let handle = self.router.handle()?;
        let agent_id = handle
            .call(|reply| Event::Register {
                capabilities: Box::new(caps),
                resume_agent_id: resume,
                identity,
                reply,
            })
            .await?;
        Ok(Response::new(RegisterResponse {
            agent_id: agent_id.to_string(),
            heartbeat_interval_ms: handle.config.heartbeat_ms,
            lease_ms: handle.config.lease_ms,
        }))
    }

    type SessionStream = BoxStream<CoordinatorMessage>;

    async fn session(
        &self,
        req: Request<Streaming<AgentMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let identity = agent_identity(&req);
        let handle = self.router.handle()?;
        let mut inbound = req.into_inner();
        let hello = match inbound.message().await? {
            Some(AgentMessage {
                msg: Some(agent_message::Msg::Hello(h)),
            }) => h,
            _ => {
                return Err(Status::invalid_argument(
                    "session: the first message must be hello",
                ));
            }
        };
        // Parsed where it enters: an id that is none of ours is refused as
        // an unknown one is.
        let agent_id = hello
            .agent_id
            .parse::<AgentId>()
            .map_err(|_| scheduler::Error::UnknownAgent(hello.agent_id.clone()))?;
        let session = self.sessions.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(scheduler::AGENT_OUTBOX_CAPACITY);
        handle
            .call(|reply| Event::SessionOpen {
                agent_id,
                hello,
                identity,
                session,
                tx,
                reply,
            })
            .await?;
        let in_flight = self.in_flight.clone();
        tokio::spawn(async move {
            loop {
                match inbound.message().await {
                    Ok(Some(AgentMessage { msg: Some(msg) })) => {
                        let units = (msg.encoded_len() / IN_FLIGHT_UNIT + 1) as u32;
                        let Ok(permit) = in_flight.clone().acquire_many_owned(units).await else {
                            break;
                        };
                        if handle
                            .send(Event::FromAgent {
                                agent_id,
                                msg: Box::new(msg),
                                permit: Some(permit),
                            })
                            .await
                            .is_err()
                        {
                            break;
                        }
                    }
                    Ok(Some(AgentMessage { msg: None })) => {}
                    Ok(None) => break,
                    Err(e) => {
                        debug!(agent = %agent_id, "stream error: {e}");
                        break;
                    }
                }
            }
            let _ = handle
                .send(Event::SessionClosed { agent_id, session })
                .await;
        });
        let stream = ReceiverStream::new(rx).map(|m| m.map_err(Status::from));
        Ok(Response::new(Box::pin(stream)))
    }
}

/// The most submissions parsed and expanded at once. Each may hold a
/// 1 MiB file and up to `matrix::MAX_EXPANDED_MATRIX_BYTES` of cells (twice,
/// while the scheduler takes them), and parsing is CPU-bound: a burst of
/// submissions waits here instead of multiplying that memory.
pub const MAX_SUBMISSIONS_IN_FLIGHT: usize = 4;

pub struct Farm {
    pub router: Router,
    /// Slots of [`MAX_SUBMISSIONS_IN_FLIGHT`].
    submissions: Arc<Semaphore>,
    /// Where a matrix the scheduler no longer has is looked for.
    archive: archive::Shared,
}

impl Farm {
    pub fn new(router: Router, archive: archive::Shared) -> Farm {
        Farm {
            router,
            submissions: Arc::new(Semaphore::new(MAX_SUBMISSIONS_IN_FLIGHT)),
            archive,
        }
    }

    /// A matrix that has left live state: from the archive, or NOT_FOUND
    /// (UNAVAILABLE when the archive cannot say).
    async fn archived(&self, matrix_id: MatrixId) -> Result<archive::Archived, Status> {
        match self.archive.matrix(matrix_id).await {
            Ok(Some(a)) => Ok(a),
            Ok(None) => Err(scheduler::Error::UnknownMatrix(matrix_id.to_string()).into()),
            Err(e) => Err(Status::unavailable(cut(format!(
                "matrix {matrix_id} is not live, and the archive could not be read: {e}"
            )))),
        }
    }
}

#[tonic::async_trait]
impl FarmService for Farm {
    async fn submit_matrix(
        &self,
        req: Request<SubmitMatrixRequest>,
    ) -> Result<Response<SubmitMatrixResponse>, Status> {
        let traceparent = farm_runtime::trace::extract_metadata(&req);
        let SubmitMatrixRequest { file_name, toml } = req.into_inner();
        let file_name = utf8("file_name", file_name, MAX_FILE_NAME_BYTES)?;
        let file_name = farm_spec::excerpt(&file_name);
        if toml.len() > MAX_MATRIX_BYTES {
            return Err(Status::invalid_argument(format!(
                "{file_name}: matrix file is {} bytes; the limit (MAX_MATRIX_BYTES) is {MAX_MATRIX_BYTES}",
                toml.len()
            )));
        }
        let toml = utf8(&file_name, toml, MAX_MATRIX_BYTES)?;
        // Held until the scheduler has the matrix: it bounds the matrices
        // in memory, not only the parsing.
        let _slot = self
            .submissions
            .acquire()
            .await
            .map_err(|_| Status::from(scheduler::Error::ShuttingDown))?;
        // Validation runs here, off the scheduler thread and off the
        // runtime's (it is CPU-bound); only a valid matrix ever reaches
        // the store.
        let (m, file_name, toml) = tokio::task::spawn_blocking(move || {
            (matrix::parse(&file_name, &toml), file_name, toml)
        })
        .await
        .map_err(|e| Status::internal(format!("parsing the matrix: {e}")))?;
        let m = m.map_err(|e| bounded(Status::invalid_argument, e.to_string()))?;
        let r = self
            .router
            .handle()?
            .call(|reply| Event::Submit {
                matrix: Box::new(m),
                file_name,
                source: toml,
                traceparent,
                reply,
            })
            .await?;
        Ok(Response::new(r))
    }

    async fn get_matrix(
        &self,
        req: Request<GetMatrixRequest>,
    ) -> Result<Response<MatrixStatus>, Status> {
        let matrix_id = caller_matrix(&req.into_inner().matrix_id)?;
        let r = self
            .router
            .handle()?
            .call(|reply| Event::Status { matrix_id, reply })
            .await;
        match r {
            Err(scheduler::Error::UnknownMatrix(_)) => {
                Ok(Response::new(self.archived(matrix_id).await?.status))
            }
            r => Ok(Response::new(r?)),
        }
    }

    type WatchMatrixStream = BoxStream<MatrixStatus>;

    async fn watch_matrix(
        &self,
        req: Request<WatchMatrixRequest>,
    ) -> Result<Response<Self::WatchMatrixStream>, Status> {
        let matrix_id = caller_matrix(&req.into_inner().matrix_id)?;
        let r = self
            .router
            .handle()?
            .call(|reply| Event::Watch { matrix_id, reply })
            .await;
        let mut rx = match r {
            // Ended: its one, final status, and the stream ends.
            Err(scheduler::Error::UnknownMatrix(_)) => {
                let status = self.archived(matrix_id).await?.status;
                let once = tokio_stream::once(Ok(status));
                return Ok(Response::new(Box::pin(once)));
            }
            r => r?,
        };
        let (tx, out) = mpsc::channel(4);
        tokio::spawn(async move {
            loop {
                let status = rx.borrow_and_update().clone();
                let running = status.state == MatrixState::Running as i32;
                // The last status sent is the terminal one; then the stream ends.
                if tx.send(Ok(status)).await.is_err() || !running || rx.changed().await.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(out),
        )))
    }

    async fn list_agents(
        &self,
        _: Request<ListAgentsRequest>,
    ) -> Result<Response<ListAgentsResponse>, Status> {
        let agents = self
            .router
            .handle()?
            .call(|reply| Event::ListAgents { reply })
            .await?;
        Ok(Response::new(ListAgentsResponse { agents }))
    }

    async fn cancel_matrix(
        &self,
        req: Request<CancelMatrixRequest>,
    ) -> Result<Response<CancelMatrixResponse>, Status> {
        let matrix_id = caller_matrix(&req.into_inner().matrix_id)?;
        let r = self
            .router
            .handle()?
            .call(|reply| Event::Cancel { matrix_id, reply })
            .await;
        let cancelled_runs = match r {
            // Archived: it has ended, nothing is left to cancel.
            Err(scheduler::Error::UnknownMatrix(_)) => self.archived(matrix_id).await.map(|_| 0)?,
            r => r?,
        };
        Ok(Response::new(CancelMatrixResponse { cancelled_runs }))
    }

    async fn list_schedules(
        &self,
        _: Request<ListSchedulesRequest>,
    ) -> Result<Response<ListSchedulesResponse>, Status> {
        let schedules = self
            .router
            .handle()?
            .call(|reply| Event::Schedule(ScheduleEvent::List { reply }))
            .await?;
        Ok(Response::new(ListSchedulesResponse { schedules }))
    }

    async fn start_bisection(
        &self,
        req: Request<farm_proto::StartBisectionRequest>,
    ) -> Result<Response<farm_proto::Bisection>, Status> {
        let request = Box::new(req.into_inner());
        if request.between.len() > farm_analysis::bisect::MAX_KERNELS {
            return Err(Status::invalid_argument(format!(
                "{} kernels between good and bad; a bisection takes at most {} (MAX_KERNELS)",
                request.between.len(),
                farm_analysis::bisect::MAX_KERNELS
            )));
        }
        // Parsed where they enter; the refusal reads as the scheduler's
        // other refusals of a bisection do.
        let between = crate::bisection::between(&request.between)
            .map_err(|e| scheduler::Error::Bisection(e.to_string()))?;
        let b = self
            .router
            .handle()?
            .call(|reply| {
                Event::Bisection(BisectionEvent::Start {
                    request,
                    between,
                    reply,
                })
            })
            .await?;
        Ok(Response::new(b))
    }

    async fn list_range(
        &self,
        req: Request<farm_proto::ListRangeRequest>,
    ) -> Result<Response<farm_proto::ListRangeResponse>, Status> {
        let farm_proto::ListRangeRequest { good, bad } = req.into_inner();
        // Parsed where they enter; a string that is no kernel at all is
        // refused as one that is no git kernel would be.
        let kernel = |k: &str| {
            k.parse::<farm_spec::Kernel>()
                .map_err(|_| Status::from(scheduler::range_refusal(k)))
        };
        let (good, bad) = (kernel(&good)?, kernel(&bad)?);
        let r = self
            .router
            .handle()?
            .call(|reply| Event::Bisection(BisectionEvent::ListRange { good, bad, reply }))
            .await?;
        Ok(Response::new(r))
    }

    async fn get_bisection(
        &self,
        req: Request<farm_proto::GetBisectionRequest>,
    ) -> Result<Response<farm_proto::Bisection>, Status> {
        let id = req.into_inner().bisection_id;
        // Parsed where it enters: an id that is none of ours names no
        // bisection.
        let bisection_id = id
            .parse::<BisectionId>()
            .map_err(|_| scheduler::Error::UnknownBisection(id.clone()))?;
        let b = self
            .router
            .handle()?
            .call(|reply| {
                Event::Bisection(BisectionEvent::Get {
                    bisection_id,
                    reply,
                })
            })
            .await?;
        Ok(Response::new(b))
    }

    async fn cancel_schedule(
        &self,
        req: Request<CancelScheduleRequest>,
    ) -> Result<Response<CancelScheduleResponse>, Status> {
        let id = req.into_inner().schedule_id;
        // Parsed where it enters: an id that is none of ours names no
        // schedule.
        let schedule_id = id
            .parse::<ScheduleId>()
            .map_err(|_| scheduler::Error::UnknownSchedule(id.clone()))?;
        self.router
            .handle()?
            .call(|reply| Event::Schedule(ScheduleEvent::Cancel { schedule_id, reply }))
            .await?;
        Ok(Response::new(CancelScheduleResponse {}))
    }

    async fn get_results(
        &self,
        req: Request<GetResultsRequest>,
    ) -> Result<Response<GetResultsResponse>, Status> {
        let matrix_id = caller_matrix(&req.into_inner().matrix_id)?;
        let r = self
            .router
            .handle()?
            .call(|reply| Event::Results(ResultsEvent::Get { matrix_id, reply }))
            .await;
        match r {
            Err(scheduler::Error::UnknownMatrix(_)) => {
                Ok(Response::new(self.archived(matrix_id).await?.results))
            }
            // Copied out of the cache here, off the scheduler thread.
            r => Ok(Response::new(r?.into_response())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_below_the_trailer_limit_of_grpc_core() {
        let m = cut("é".repeat(20_000));
        assert!(m.len() <= MAX_STATUS_MESSAGE_BYTES, "{}", m.len());
        assert!(m.ends_with("… (cut; the message was 40000 bytes)"), "{m}");
        assert_eq!(cut("short".into()), "short");
    }

    #[test]
    fn invalid_utf8_is_named_with_its_offset() {
        let s = utf8("m.toml", b"name = \"\xff\"".to_vec(), 100).unwrap_err();
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        assert_eq!(
            s.message(),
            "m.toml: not UTF-8 (byte 8 is not part of a UTF-8 character)"
        );
        let s = utf8("file_name", vec![b'a'; 101], 100).unwrap_err();
        assert_eq!(s.message(), "file_name is 101 bytes; the limit is 100");
    }
}
