//! A real llama.cpp server for the tests (issue 15): `scripts/llama-setup`
//! installs it and writes the tiny test model (once per machine; it checks a
//! warm cache in well under a second), and [`LlamaServer::start`] runs it on
//! 127.0.0.1 with the slots, context and key a test asks for.
//!
//! A server is killed when its handle drops, and also when the test binary
//! exits: it is spawned from a thread that never ends, with
//! `PR_SET_PDEATHSIG`, so a server kept in a `static` (one per test binary)
//! does not outlive the tests.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// Where the setup script put the server and the model.
pub struct Installed {
    pub server: PathBuf,
    pub model: PathBuf,
}

/// Runs `scripts/llama-setup` once per test binary.
pub fn installed() -> &'static Installed {
    static INSTALLED: OnceLock<Installed> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/llama-setup");
        let out = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .expect("bash runs scripts/llama-setup");
        assert!(
            out.status.success(),
            "scripts/llama-setup failed ({}): the tests need a real llama-server",
            out.status
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let get = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("scripts/llama-setup printed no {key}=: {text}"))
        };
        Installed {
            server: get("server"),
            model: get("model"),
        }
    })
}

/// How a test wants its server.
#[derive(Debug, Clone)]
pub struct Options {
    /// Parallel slots (`-np`).
    pub slots: usize,
    /// Context per slot, in tokens (`-c` is slots times this).
    pub ctx_per_slot: usize,
    /// `--api-key`.
    pub api_key: Option<String>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            slots: 4,
            ctx_per_slot: 1024,
            api_key: None,
        }
    }
}

/// A running llama-server on 127.0.0.1.
pub struct LlamaServer {
    pid: i32,
    pub port: u16,
    pub log: PathBuf,
    _logs: std::sync::Arc<tempfile::TempDir>,
}

impl LlamaServer {
    /// Starts a server and waits until it answers `/health`. A port taken
    /// between choosing and binding it is retried with another.
    pub fn start(opts: &Options) -> LlamaServer {
        let installed = installed();
        let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
        for _ in 0..5 {
            let port = free_port();
            let log = dir.path().join(format!("llama-server-{port}.log"));
            let mut cmd = Command::new(&installed.server);
            cmd.arg("-m")
                .arg(&installed.model)
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["-c", &(opts.slots * opts.ctx_per_slot).to_string()])
                .args(["-np", &opts.slots.to_string()])
                // One thread: the machine is shared with cargo builds.
                // `/metrics` gives the server's own token counters.
                .args(["-t", "1", "--no-webui", "--metrics"])
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&log).unwrap())
                .stderr(std::fs::File::create(log.with_extension("err")).unwrap());
            if let Some(key) = &opts.api_key {
                cmd.args(["--api-key", key]);
            }
            let pid = spawn_tied_to_process(cmd);
            let server = LlamaServer {
                pid,
                port,
                log,
                _logs: dir.clone(),
            };
            match server.wait_healthy() {
                Ok(()) => return server,
                Err(why) => {
                    eprintln!("llama-server on port {port} did not start: {why}");
                    drop(server);
                }
            }
        }
        panic!("llama-server did not start in 5 tries");
    }

    /// `http://127.0.0.1:PORT`, no path.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A counter or gauge of the server's `/metrics` (Prometheus text,
    /// e.g. `llamacpp:tokens_predicted_total`).
    pub fn metric(&self, name: &str) -> f64 {
        let body = get_body(self.port, "/metrics")
            .unwrap_or_else(|| panic!("llama-server on port {} gave no /metrics", self.port));
        body.lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|l| {
                let (key, value) = l.split_once(' ')?;
                (key == name).then(|| value.trim().parse().ok()).flatten()
            })
            .unwrap_or_else(|| panic!("/metrics has no {name}: {body}"))
    }

    fn exited(&self) -> bool {
        // SAFETY: waitpid on our own child, without blocking.
        let mut status = 0;
        let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        r == self.pid || r < 0
    }

    fn wait_healthy(&self) -> Result<(), String> {
        loop {
            if self.exited() {
                let err =
                    std::fs::read_to_string(self.log.with_extension("err")).unwrap_or_default();
                let last = err.lines().rev().take(3).collect::<Vec<_>>().join(" | ");
                return Err(format!("it exited: {last}"));
            }
            if get_status(self.port, "/health") == Some(200) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        // SAFETY: signalling and reaping our own child.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}

/// The default server of a test binary: started once, shared by its tests.
pub fn shared() -> &'static LlamaServer {
    static SHARED: OnceLock<LlamaServer> = OnceLock::new();
    SHARED.get_or_init(|| LlamaServer::start(&Options::default()))
}

/// Spawns `cmd` from a thread that lives as long as the process, with
/// `PR_SET_PDEATHSIG`: the signal fires when the spawning thread ends, so
/// that thread must never end before the process does.
fn spawn_tied_to_process(mut cmd: Command) -> i32 {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: prctl is async-signal-safe; nothing else runs in the child
        // before exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("llama-server starts");
        tx.send(child.id() as i32).unwrap();
        // The child is reaped by its LlamaServer; this thread only keeps
        // the death signal armed.
        std::mem::forget(child);
        loop {
            std::thread::park();
        }
    });
    rx.recv().unwrap()
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    l.local_addr().unwrap().port()
}

/// The status of a plain GET, or `None` if nothing answered.
fn get_status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    let head = String::from_utf8_lossy(&buf[..n]);
    head.split_whitespace().nth(1)?.parse().ok()
}

/// The body of a plain GET answered 200, or `None`.
fn get_body(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        // HTTP/1.0: the body comes whole, never chunked.
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    if head.split_whitespace().nth(1) != Some("200") {
        return None;
    }
    Some(body.to_owned())
}

/// Two suite problems (MultiPL-E's schema) one text answers differently:
/// `x + 1` is `inc` and not `dec`.
pub const LIVE_PROBLEMS: &str = concat!(
    r#"{"name": "live_inc", "language": "rs", "prompt": "/// Adds one.\nfn inc(x: i32) -> i32 {\n", "tests": "}\n\nfn main() {\n    let candidate = inc;\n    assert_eq!(candidate(1), 2);\n    assert_eq!(candidate(-1), 0);\n}\n", "stop_tokens": ["\n}"]}"#,
    "\n",
    r#"{"name": "live_dec", "language": "rs", "prompt": "/// Subtracts one.\nfn dec(x: i32) -> i32 {\n", "tests": "}\n\nfn main() {\n    let candidate = dec;\n    assert_eq!(candidate(1), 0);\n}\n", "stop_tokens": ["\n}"]}"#,
    "\n",
);

/// A pools file whose pool `tiny` is the server at `url`, with a GBNF
/// grammar in its `extra_body` that forces the tiny model to write `text`.
pub fn forced_pool(url: &str, text: &str) -> String {
    let grammar = format!("root ::= {}", serde_json::to_string(text).unwrap());
    format!(
        "[pools.tiny]\nbase_url = \"{url}/v1\"\nmodel = \"tiny\"\nmax_in_flight = 2\n\
         sampling = {{ temperature = 0.8, seed = 7 }}\nextra_body = {{ grammar = {} }}\n",
        serde_json::to_string(&grammar).unwrap()
    )
}
