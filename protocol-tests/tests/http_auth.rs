//! Authentication on Brook's HTTP APIs (`broker/src/admin_security.rs`): a node's admin
//! listener with `admin.basic.auth.credentials.file` refuses requests without the right
//! HTTP Basic credentials with 401 and `WWW-Authenticate` before anything happens (no fault
//! rule is added), serves them with the right ones (`brook fault` through
//! `BROOK_HTTP_CREDENTIALS`, the live page), leaves `/metrics` open when told to, and serves
//! TLS with `admin.listener=https://...`; `brook cluster --http-auth` does the same for the
//! supervisor's API (a node is not killed without credentials) and its calls to the nodes.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use brook_protocol_tests::broker::brook_bin;
use brook_protocol_tests::cluster::basic_authorization;
use brook_protocol_tests::process::{run_brook, run_brook_with_env, write_test_pki};
use brook_protocol_tests::Broker;
use serde_json::Value;

const IO_TIMEOUT: Duration = Duration::from_secs(10);
const CLI: Duration = Duration::from_secs(20);
/// Largest answer read.
const ANSWER_BYTES_MAX: u64 = 4 << 20;
const USER: &str = "ops";
const PASSWORD: &str = "right-password";
const RULE: &str = r#"{"action":"error","api":"produce","error_code":6}"#;

/// One HTTP answer: status, lower-cased head, body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// One HTTP/1.1 exchange with `Connection: close` on `stream`.
fn exchange(
    mut stream: impl Read + Write,
    host: &str,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: Option<&str>,
) -> Result<Answer, String> {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if let Some(a) = auth {
        req.push_str(&format!("Authorization: {a}\r\n"));
    }
    let body = body.unwrap_or("");
    if !body.is_empty() {
        req.push_str("Content-Type: application/json\r\n");
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream
        .write_all(req.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    stream
        .take(ANSWER_BYTES_MAX)
        .read_to_end(&mut raw)
        .map_err(|e| e.to_string())?;
    let raw = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("not an HTTP answer: {raw:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    Ok(Answer {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_string(),
    })
}

fn http(addr: &str, method: &str, path: &str, auth: Option<&str>, body: Option<&str>) -> Answer {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    exchange(s, addr, method, path, auth, body).expect("HTTP exchange")
}

/// The answer refuses with Basic's challenge.
fn assert_refused(a: &Answer, what: &str) {
    assert_eq!(a.status, 401, "{what}: {}\n{}", a.head, a.body);
    assert!(
        a.head.contains("www-authenticate: basic realm=\"brook\""),
        "{what}: {}",
        a.head
    );
}

fn credentials_file(dir: &Path) -> String {
    let path = dir.join("admin-credentials.properties");
    std::fs::write(
        &path,
        format!("# who may use the admin API\n{USER}={PASSWORD}\n"),
    )
    .unwrap();
    path.display().to_string()
}

fn rules(admin: &str, auth: &str) -> Vec<Value> {
    let a = http(admin, "GET", "/faults", Some(auth), None);
    assert_eq!(a.status, 200, "{}", a.body);
    let v: Value = serde_json::from_str(&a.body).expect("JSON");
    v["rules"].as_array().cloned().unwrap_or_default()
}

#[test]
fn the_admin_listener_refuses_requests_without_the_right_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let file = credentials_file(dir.path());
    let broker = Broker::start_with(&[
        ("admin.listener", "127.0.0.1:0"),
        ("admin.basic.auth.credentials.file", file.as_str()),
        ("admin.metrics.authentication.required", "false"),
    ]);
    let admin = broker.admin_address();
    let right = basic_authorization(USER, PASSWORD);
    let wrong = [
        ("no credentials", None),
        ("a wrong password", Some(basic_authorization(USER, "wrong"))),
        (
            "an unknown user",
            Some(basic_authorization("eve", PASSWORD)),
        ),
        ("a bearer token", Some(format!("Bearer {PASSWORD}"))),
    ];
    for (what, auth) in &wrong {
        let a = http(&admin, "POST", "/faults", auth.as_deref(), Some(RULE));
        assert_refused(&a, what);
        assert_refused(&http(&admin, "GET", "/", auth.as_deref(), None), what);
        assert_refused(
            &http(&admin, "GET", "/v1/cluster", auth.as_deref(), None),
            what,
        );
    }
    assert!(
        rules(&admin, &right).is_empty(),
        "a refused POST added a rule"
    );

    // `brook fault` without credentials is refused too; with BROOK_HTTP_CREDENTIALS it works.
    let add = ["fault", "add", "--admin", &admin, "--api", "produce"];
    let add = [&add[..], &["--action", "error", "--error", "6"]].concat();
    let out = run_brook(&add, CLI);
    assert!(!out.status.success(), "{out:?}");
    assert!(out.stderr.contains("401"), "{out:?}");
    assert!(rules(&admin, &right).is_empty());
    let creds = format!("{USER}:{PASSWORD}");
    let out = run_brook_with_env(&add, &[("BROOK_HTTP_CREDENTIALS", &creds)], CLI);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(rules(&admin, &right).len(), 1);
    let a = http(&admin, "POST", "/faults", Some(&right), Some(RULE));
    assert_eq!(a.status, 201, "{}", a.body);
    assert_eq!(rules(&admin, &right).len(), 2);

    // The live page loads with credentials (a browser sends them with its fetches, too).
    let page = http(&admin, "GET", "/", Some(&right), None);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<html"), "{}", page.body);
    // The test harness's view waits pass credentials too.
    let views = brook_tools::wait::Views::new(admin.clone());
    assert!(views.get("/v1/cluster").is_err());
    let views = views.with_credentials(USER, PASSWORD);
    assert_eq!(views.get("/v1/cluster").expect("view")["node_id"], 1);
    // admin.metrics.authentication.required=false: a scraper needs none.
    let metrics = http(&admin, "GET", "/metrics", None, None);
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    assert!(metrics.body.contains("# TYPE"), "{}", metrics.body);
}

#[test]
fn an_https_admin_listener_serves_tls_and_needs_credentials_for_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path();
    write_test_pki(pki, "pw");
    let file = credentials_file(pki);
    let keystore = pki.join("broker.keystore.pem").display().to_string();
    let broker = Broker::start_with(&[
        ("admin.listener", "https://127.0.0.1:0"),
        ("admin.listeners.https.ssl.keystore.type", "PEM"),
        (
            "admin.listeners.https.ssl.keystore.location",
            keystore.as_str(),
        ),
        ("admin.basic.auth.credentials.file", file.as_str()),
    ]);
    let admin = broker.admin_address();
    let trust: std::collections::BTreeMap<String, String> = [
        ("ssl.truststore.type", "PEM".to_string()),
        (
            "ssl.truststore.location",
            pki.join("ca.pem").display().to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let config = brook::security::ssl::client_tls(&trust, "client").expect("client context");
    let https = |auth: Option<&str>| {
        let tcp = TcpStream::connect(&admin).unwrap();
        tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let conn = rustls::ClientConnection::new(Arc::clone(&config), name).unwrap();
        exchange(
            rustls::StreamOwned::new(conn, tcp),
            &admin,
            "GET",
            "/metrics",
            auth,
            None,
        )
    };
    // The default admin.metrics.authentication.required=true.
    assert_refused(&https(None).expect("HTTPS answer"), "no credentials");
    let ok = https(Some(&basic_authorization(USER, PASSWORD))).expect("HTTPS answer");
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(ok.body.contains("# TYPE"), "{}", ok.body);
    // Plain HTTP gets no HTTP answer from a TLS listener.
    let s = TcpStream::connect(&admin).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let plain = exchange(s, &admin, "GET", "/metrics", None, None);
    assert!(
        plain.is_err(),
        "plain HTTP was answered: {}",
        plain.unwrap().head
    );
}

/// A `brook cluster` child, stopped (SIGTERM, then reaped) when dropped.
struct Supervisor(std::process::Child);

impl Drop for Supervisor {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
}

fn node_alive(sup: &str, auth: &str) -> bool {
    let a = http(sup, "GET", "/nodes", Some(auth), None);
    assert_eq!(a.status, 200, "{}", a.body);
    let v: Value = serde_json::from_str(&a.body).expect("JSON");
    v["nodes"][0]["alive"] == true
}

#[test]
fn brook_cluster_http_auth_guards_the_supervisor_and_its_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(brook_bin())
        .args(["cluster", "--http-auth", "--nodes", "1", "--base-port", "0"])
        .args(["--supervisor-listener", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn brook cluster --http-auth");
    let stdout = child.stdout.take().unwrap();
    let _sup = Supervisor(child);
    // Bounded: the supervisor prints its lines and exits on a failed start; the
    // credentials are printed after CLUSTER READY.
    let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
    let ready = lines
        .by_ref()
        .find(|l| l.starts_with("CLUSTER READY"))
        .expect("CLUSTER READY");
    let creds = lines
        .find_map(|l| {
            l.trim()
                .strip_prefix("brook fault/node: export BROOK_HTTP_CREDENTIALS=")
                .map(str::to_string)
        })
        .expect("the printed credentials");
    let sup = field(&ready, "supervisor").to_string();
    let admin = field(&ready, "admins")
        .split_once('@')
        .expect("1@HOST:PORT")
        .1
        .to_string();
    let (user, password) = creds.split_once(':').expect("user:password");
    let right = basic_authorization(user, password);
    let wrong = basic_authorization(user, "wrong");

    for auth in [None, Some(wrong.as_str())] {
        assert_refused(&http(&sup, "POST", "/nodes/1/kill", auth, None), "kill");
        assert_refused(&http(&sup, "GET", "/", auth, None), "live page");
        // The node's own admin listener needs the same credentials.
        assert_refused(&http(&admin, "POST", "/faults", auth, Some(RULE)), "node");
    }
    assert!(node_alive(&sup, &right), "a refused kill killed the node");
    let kill = ["node", "kill", "--supervisor", &sup, "--id", "1"];
    let out = run_brook(&kill, CLI);
    assert!(
        !out.status.success() && out.stderr.contains("401"),
        "{out:?}"
    );
    assert!(node_alive(&sup, &right));

    // The supervisor's calls to the node carry the credentials: forwarded faults, views.
    let a = http(&sup, "POST", "/nodes/1/faults", Some(&right), Some(RULE));
    assert_eq!(a.status, 201, "{}", a.body);
    let view = http(&sup, "GET", "/v1/cluster", Some(&right), None);
    let v: Value = serde_json::from_str(&view.body).expect("JSON");
    assert_eq!(v["nodes"]["1"]["node_id"], 1, "{v}");
    let page = http(&sup, "GET", "/", Some(&right), None);
    assert!(page.status == 200 && page.body.contains("<html"));

    let out = run_brook_with_env(&kill, &[("BROOK_HTTP_CREDENTIALS", &creds)], CLI);
    assert!(out.status.success(), "{out:?}");
    assert!(!node_alive(&sup, &right), "the kill with credentials");
}
