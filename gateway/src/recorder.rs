//! A recording proxy: forwards every request to a real engine on loopback
//! and keeps what the engine sent, chunk by chunk, so a test compares what
//! assay stored with what the server really sent (not with a guess, and not
//! with what the test gateway imitates).
//!
//! The response streams through as it arrives; when the client closes the
//! stream early (assay's cut at the fence), the proxy drops the upstream
//! response too, which is how the engine learns to stop, and records that the
//! client closed it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, Uri};
use axum::response::Response;
use axum::Router;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// One request and what the engine answered.
#[derive(Debug, Clone, Default)]
pub struct Exchange {
    pub path: String,
    /// The request body as JSON (`Null` if it was not JSON).
    pub request: Value,
    pub status: u16,
    /// The response body as the engine sent it (every byte the proxy read).
    pub body: String,
    /// The stream reached its end (the engine closed it).
    pub finished: bool,
    /// The client closed the stream before its end.
    pub client_closed: bool,
}

impl Exchange {
    /// The `data:` payloads of an SSE body, `[DONE]` included as a string.
    pub fn events(&self) -> Vec<Value> {
        sse_events(&self.body)
    }

    /// Chunks whose delta carried text (content or reasoning), as a client
    /// counts them.
    pub fn text_chunks(&self) -> usize {
        self.events()
            .iter()
            .filter(|e| {
                let d = &e["choices"][0]["delta"];
                ["content", "reasoning_content", "reasoning"]
                    .iter()
                    .any(|k| d[k].as_str().is_some_and(|s| !s.is_empty()))
            })
            .count()
    }

    /// The text of every content delta, in order.
    pub fn content(&self) -> String {
        self.events()
            .iter()
            .filter_map(|e| {
                e["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    }

    /// The last usage block sent.
    pub fn usage(&self) -> Option<Value> {
        self.events()
            .iter()
            .rev()
            .find(|e| e["usage"].is_object())
            .map(|e| e["usage"].clone())
    }

    pub fn finish_reason(&self) -> Option<String> {
        self.events()
            .iter()
            .find_map(|e| e["choices"][0]["finish_reason"].as_str().map(str::to_owned))
    }
}

/// Every `data:` payload of an SSE body, parsed (`[DONE]` as a string).
pub fn sse_events(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|block| {
            let data: String = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            if data.is_empty() {
                None
            } else if data == "[DONE]" {
                Some(Value::String(data))
            } else {
                serde_json::from_str(&data).ok()
            }
        })
        .collect()
}

struct Complete {
    shared: Arc<Shared>,
    slot: usize,
}

impl Drop for Complete {
    fn drop(&mut self) {
        let mut all = self.shared.exchanges.lock().unwrap();
        let (e, done) = &mut all[self.slot];
        if !e.finished {
            e.client_closed = true;
        }
        *done = true;
    }
}

/// A running recorder on 127.0.0.1. Dropping it stops the server.
pub struct Recorder {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
}

struct Shared {
    upstream: String,
    http: reqwest::Client,
    /// In order of arrival; an exchange is complete once `finished` or
    /// `client_closed` is set, or its status is not 200.
    exchanges: Mutex<Vec<(Exchange, bool)>>,
}

impl Recorder {
    /// Forwards to `upstream` (`http://127.0.0.1:PORT`, no path), on a
    /// runtime of its own thread so it serves whatever the caller does.
    pub fn start_on_thread(upstream: &str) -> std::io::Result<Recorder> {
        let upstream = upstream.trim_end_matches('/').to_owned();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("recorder runtime");
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::bind(("127.0.0.1", 0)).await {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let addr = listener.local_addr().expect("bound");
                let shared = Arc::new(Shared {
                    upstream,
                    http: reqwest::Client::new(),
                    exchanges: Mutex::new(Vec::new()),
                });
                let app = Router::new().fallback(forward).with_state(shared.clone());
                let (stop, stopped) = oneshot::channel::<()>();
                let _ = tx.send(Ok((addr, shared, stop)));
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        let (addr, shared, stop) = rx
            .recv()
            .map_err(|_| std::io::Error::other("recorder thread died"))??;
        Ok(Recorder {
            addr,
            shared,
            stop: Some(stop),
        })
    }

    /// The base URL a pool names, `/v1` included.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every exchange so far, complete or not, in order of arrival.
    pub fn exchanges(&self) -> Vec<Exchange> {
        let all = self.shared.exchanges.lock().unwrap();
        all.iter().map(|(e, _)| e.clone()).collect()
    }

    /// Waits until every exchange begun so far is complete (the client or
    /// the engine closed it), then returns them. A stream the client closed
    /// is complete once the proxy has noticed, at the engine's next chunk.
    pub fn settled(&self) -> Vec<Exchange> {
        loop {
            {
                let all = self.shared.exchanges.lock().unwrap();
                if all.iter().all(|(_, done)| *done) {
                    return all.iter().map(|(e, _)| e.clone()).collect();
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn forward(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path_and_query()
        .map_or(uri.path().to_owned(), |p| p.as_str().to_owned());
    let slot = {
        let mut all = shared.exchanges.lock().unwrap();
        all.push((
            Exchange {
                path: path.clone(),
                request: serde_json::from_slice(&body).unwrap_or(Value::Null),
                ..Exchange::default()
            },
            false,
        ));
        all.len() - 1
    };
    // Marks the exchange complete when dropped: at the stream's end, or
    // when the client went away before the engine answered (hyper then
    // drops this handler mid-await).
    let complete = Complete {
        shared: shared.clone(),
        slot,
    };
    let update = {
        let shared = shared.clone();
        move |f: &dyn Fn(&mut Exchange) -> bool| {
            let mut all = shared.exchanges.lock().unwrap();
            let (e, _) = &mut all[slot];
            f(e);
        }
    };
    let mut request = shared
        .http
        .request(method, format!("{}{path}", shared.upstream))
        .body(body);
    for name in ["authorization", "content-type"] {
        if let Some(v) = headers.get(name) {
            request = request.header(name, v.clone());
        }
    }
    let upstream = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            update(&|x: &mut Exchange| {
                x.status = 502;
                x.body = format!("the recorder could not reach the engine: {e}");
                true
            });
            return Response::builder()
                .status(502)
                .body(Body::from("recorder: upstream unreachable"))
                .unwrap();
        }
    };
    let status = upstream.status();
    let content_type = upstream.headers().get("content-type").cloned();
    update(&|x: &mut Exchange| {
        x.status = status.as_u16();
        false
    });
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    tokio::spawn(async move {
        let _complete = complete;
        let mut stream = upstream.bytes_stream();
        let mut client_closed = false;
        while let Some(piece) = stream.next().await {
            let Ok(piece) = piece else { break };
            let text = String::from_utf8_lossy(&piece).into_owned();
            update(&|x: &mut Exchange| {
                x.body.push_str(&text);
                false
            });
            if tx.send(Ok(piece)).await.is_err() {
                client_closed = true;
                break;
            }
        }
        // Dropping the upstream stream closes its connection.
        drop(stream);
        update(&|x: &mut Exchange| {
            x.client_closed = client_closed;
            x.finished = !client_closed;
            true
        });
    });
    let mut resp = Response::new(Body::from_stream(
        tokio_stream::wrappers::ReceiverStream::new(rx),
    ));
    *resp.status_mut() = status;
    if let Some(ct) = content_type {
        resp.headers_mut().insert("content-type", ct);
    } else {
        resp.headers_mut()
            .insert("content-type", HeaderValue::from_static("application/json"));
    }
    resp
}
