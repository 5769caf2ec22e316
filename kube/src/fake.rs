//! A fake kubelet: `v1.PodResourcesLister/List` on a unix socket, answering what the test
//! sets, as the kubelet's grpc-go server answers (headers, one length-prefixed message,
//! `grpc-status` trailers; `UNIMPLEMENTED` for any other method). For tests only.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::api::ListPodResourcesResponse;
use crate::call::frame;

/// What the fake answers `List` with.
#[derive(Debug, Clone)]
pub enum Answer {
    /// This response.
    Pods(ListPodResourcesResponse),
    /// A gRPC error with this code and message.
    Status(u32, String),
    /// Nothing, ever (the call must time out).
    Hang,
}

/// A running fake kubelet; stops and removes its socket when dropped.
pub struct FakeKubelet {
    path: PathBuf,
    answer: Arc<Mutex<Answer>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    calls: Arc<Mutex<u32>>,
}

impl FakeKubelet {
    /// Serves `answer` on a new socket at `path`.
    pub fn start(path: &Path, answer: Answer) -> FakeKubelet {
        let _ = std::fs::remove_file(path);
        let std_listener = std::os::unix::net::UnixListener::bind(path).expect("bind the socket");
        std_listener.set_nonblocking(true).expect("non-blocking");
        let answer = Arc::new(Mutex::new(answer));
        let calls = Arc::new(Mutex::new(0));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let (shared, counted) = (Arc::clone(&answer), Arc::clone(&calls));
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::UnixListener::from_std(std_listener).expect("listener");
                tokio::pin!(stopped);
                loop {
                    tokio::select! {
                        _ = &mut stopped => return,
                        accepted = listener.accept() => {
                            let Ok((stream, _)) = accepted else { continue };
                            let (answer, calls) = (Arc::clone(&shared), Arc::clone(&counted));
                            tokio::spawn(connection(stream, answer, calls));
                        }
                    }
                }
            });
        });
        FakeKubelet {
            path: path.to_owned(),
            answer,
            stop: Some(stop),
            thread: Some(thread),
            calls,
        }
    }

    /// Answers `answer` from now on.
    pub fn set(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    /// How many `List` calls were answered (or left hanging).
    pub fn calls(&self) -> u32 {
        *self.calls.lock().unwrap()
    }
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn connection(
    stream: tokio::net::UnixStream,
    answer: Arc<Mutex<Answer>>,
    calls: Arc<Mutex<u32>>,
) {
    let Ok(mut conn) = h2::server::handshake(stream).await else {
        return;
    };
    while let Some(Ok((request, mut respond))) = conn.accept().await {
        let (head, mut body) = request.into_parts();
        while let Some(Ok(chunk)) = body.data().await {
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let grpc = |code: u32, message: &str| {
            let mut t = http::HeaderMap::new();
            t.insert("grpc-status", code.to_string().parse().unwrap());
            if !message.is_empty() {
                let encoded = message.replace('%', "%25").replace(' ', "%20");
                t.insert("grpc-message", encoded.parse().unwrap());
            }
            t
        };
        let ok = http::Response::builder()
            .status(200)
            .header("content-type", "application/grpc")
            .body(())
            .unwrap();
        if head.uri.path() != crate::METHOD {
            let Ok(mut send) = respond.send_response(ok, false) else {
                continue;
            };
            let _ = send.send_trailers(grpc(12, "unknown method"));
            continue;
        }
        *calls.lock().unwrap() += 1;
        let now = answer.lock().unwrap().clone();
        match now {
            Answer::Hang => {
                // Keep the stream open, unanswered, until the client gives up.
                std::future::pending::<()>().await;
            }
            Answer::Status(code, message) => {
                let Ok(mut send) = respond.send_response(ok, false) else {
                    continue;
                };
                let _ = send.send_trailers(grpc(code, &message));
            }
            Answer::Pods(response) => {
                let Ok(mut send) = respond.send_response(ok, false) else {
                    continue;
                };
                let data: Bytes = frame(&response);
                if send.send_data(data, false).is_ok() {
                    let _ = send.send_trailers(grpc(0, ""));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::api::{ContainerDevices, ContainerResources, PodResources};
    use crate::{list, Device, DeviceMap, Error, Poller};

    const GPU: &str = "GPU-11111111-2222-3333-4444-555555555555";

    fn socket(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("gpupeek-kube-{}-{name}.sock", std::process::id()))
    }

    fn pods() -> ListPodResourcesResponse {
        ListPodResourcesResponse {
            pod_resources: vec![PodResources {
                name: "train-0".into(),
                namespace: "ml".into(),
                containers: vec![ContainerResources {
                    name: "trainer".into(),
                    devices: vec![ContainerDevices {
                        resource_name: "nvidia.com/gpu".into(),
                        device_ids: vec![GPU.into()],
                    }],
                    dynamic_resources: Vec::new(),
                }],
            }],
        }
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn list_reads_what_the_kubelet_answers() {
        let path = socket("list");
        let kubelet = FakeKubelet::start(&path, Answer::Pods(pods()));
        let response = list(&path, SECOND).unwrap();
        assert_eq!(response, pods());
        let map = DeviceMap::new(&response);
        let owners = map.owners(&Device {
            index: 0,
            uuid: Some(GPU),
            minor: None,
            mig: None,
        });
        assert_eq!(owners[0].pod, "train-0");
        assert_eq!(kubelet.calls(), 1);

        kubelet.set(Answer::Pods(ListPodResourcesResponse::default()));
        assert!(DeviceMap::new(&list(&path, SECOND).unwrap()).is_empty());
    }

    #[test]
    fn errors_timeouts_and_absent_sockets_are_said() {
        let path = socket("errors");
        let kubelet = FakeKubelet::start(&path, Answer::Status(7, "permission denied".into()));
        match list(&path, SECOND) {
            Err(Error::Status { code: 7, message }) => assert_eq!(message, "permission denied"),
            other => panic!("{other:?}"),
        }
        kubelet.set(Answer::Hang);
        let started = std::time::Instant::now();
        let e = list(&path, Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, Error::Timeout(_)), "{e}");
        assert!(started.elapsed() < SECOND, "{:?}", started.elapsed());
        assert_eq!(e.to_string(), "no answer within 200 ms");
        drop(kubelet);
        let e = list(&path, SECOND).unwrap_err();
        assert!(matches!(e, Error::Connect(_)), "{e}");
        assert!(e.to_string().starts_with("cannot connect: "), "{e}");
    }

    #[test]
    fn a_peer_that_is_not_grpc_is_a_protocol_error() {
        let path = socket("nothttp2");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            use std::io::Write;
            let (mut s, _) = listener.accept().unwrap();
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        });
        let e = list(&path, SECOND).unwrap_err();
        assert!(matches!(e, Error::Protocol(_)), "{e}");
        server.join().unwrap();
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn the_poller_follows_the_kubelet() {
        let path = socket("poller");
        let kubelet = FakeKubelet::start(&path, Answer::Pods(pods()));
        let poller = Poller::spawn(
            "test",
            path.clone(),
            Duration::from_millis(20),
            Duration::from_millis(500),
        );
        let wait = |up: bool| {
            for _ in 0..250 {
                let state = poller.current();
                if state.up == up && state.map.is_empty() != up {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            panic!("the poller never saw up={up}");
        };
        wait(true);
        kubelet.set(Answer::Status(14, "unavailable".into()));
        wait(false);
        kubelet.set(Answer::Pods(pods()));
        wait(true);
    }
}
