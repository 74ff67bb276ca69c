//! Runs the built helper over pipes, as pkie does, with requests made from
//! the certificates in testdata/ (made by testdata/make-fixtures.sh), and
//! checks every verdict and error answer.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// 2026-01-01T00:00:00Z: inside every fixture's validity except the
/// expired and not-yet-valid leaves'.
const T: u64 = 1_767_225_600;
/// 2035-01-01T00:00:00Z, leaf.pem's notAfter.
const LEAF_NOT_AFTER: u64 = 2_051_222_400;

/// The base64 bodies of the certificates in testdata/NAME.pem: a PEM body
/// is the standard base64 of the DER, the protocol's encoding.
fn pem(name: &str) -> Vec<String> {
    let path = format!("{}/testdata/{name}.pem", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        if line.starts_with("-----BEGIN CERTIFICATE") {
            cur = Some(String::new());
        } else if line.starts_with("-----END CERTIFICATE") {
            out.extend(cur.take());
        } else if let Some(c) = cur.as_mut() {
            c.push_str(line.trim());
        }
    }
    assert!(!out.is_empty(), "{path} holds no certificate");
    out
}

fn one(name: &str) -> String {
    pem(name).remove(0)
}

fn der(name: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(one(name))
        .expect("fixture PEM is base64")
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Helper {
    /// Starts the helper and returns it with its hello line.
    fn start() -> (Helper, Value) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pkie-verify-webpki"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start helper");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut h = Helper {
            child,
            stdin,
            stdout,
        };
        let hello = h.read();
        (h, hello)
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).expect("read answer");
        assert!(n > 0, "helper closed its output");
        assert!(
            line.ends_with('\n'),
            "answer not newline-terminated: {line:?}"
        );
        assert!(line.len() <= 64 << 10, "answer over 64 KiB");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("answer {line:?}: {e}"))
    }

    /// Sends one raw line (a newline is added) and reads the answer.
    fn send_raw(&mut self, line: &[u8]) -> Value {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line).expect("write request");
        stdin.write_all(b"\n").expect("write newline");
        stdin.flush().expect("flush");
        self.read()
    }

    fn send(&mut self, req: &Value) -> Value {
        self.send_raw(req.to_string().as_bytes())
    }

    /// Closes the helper's input and returns its exit status and anything
    /// it wrote after the last answer.
    fn finish(mut self) -> (std::process::ExitStatus, String) {
        drop(self.stdin.take());
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).expect("read rest");
        (self.child.wait().expect("wait"), rest)
    }
}

fn request(
    id: u64,
    roots: &[String],
    chain: &[String],
    host: &str,
    time: u64,
    purpose: &str,
) -> Value {
    json!({"id": id, "roots": roots, "chain": chain, "host": host, "time": time, "purpose": purpose})
}

#[test]
fn hello_names_protocol_and_locked_webpki() {
    let (h, hello) = Helper::start();
    assert_eq!(hello["protocol"], "pkie-verify/1");
    assert_eq!(hello["backend"], "webpki");
    // The version must be the one Cargo.toml pins (and Cargo.lock resolves).
    let toml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("Cargo.toml");
    let pin = toml
        .lines()
        .find(|l| l.contains("package = \"rustls-webpki\""))
        .and_then(|l| l.split("version = \"=").nth(1))
        .and_then(|v| v.split('"').next())
        .expect("Cargo.toml pins rustls-webpki with =");
    assert!(pin.starts_with("0.103."), "pinned {pin}");
    assert_eq!(hello["library"], format!("rustls-webpki {pin} (ring)"));
    let (status, rest) = h.finish();
    assert!(status.success(), "exit status {status}");
    assert_eq!(rest, "");
}

/// One verification case: the request and the expected verdict.
struct Case {
    name: &'static str,
    roots: Vec<String>,
    chain: Vec<String>,
    host: &'static str,
    time: u64,
    purpose: &'static str,
    code: &'static str,
    depth: u64,
}

fn case(
    name: &'static str,
    roots: &[&str],
    chain: &[&str],
    host: &'static str,
    code: &'static str,
) -> Case {
    Case {
        name,
        roots: roots.iter().flat_map(|r| pem(r)).collect(),
        chain: chain.iter().flat_map(|c| pem(c)).collect(),
        host,
        time: T,
        purpose: "server",
        code,
        depth: 0,
    }
}

#[test]
fn verdicts() {
    let truncated = {
        let d = der("leaf");
        b64(&d[..d.len() / 2])
    };
    let cases = vec![
        Case {
            depth: 3,
            ..case(
                "valid",
                &["root"],
                &["leaf", "int"],
                "www.example.com",
                "ok",
            )
        },
        Case {
            depth: 3,
            ..case(
                "valid IP host",
                &["root"],
                &["leaf", "int"],
                "127.0.0.1",
                "ok",
            )
        },
        Case {
            depth: 3,
            ..case("valid, no host", &["root"], &["leaf", "int"], "", "ok")
        },
        Case {
            depth: 3,
            ..case(
                "valid, extra and reordered candidates",
                &["other-root", "root"],
                &["leaf", "pl-int1", "nc-int", "int"],
                "www.example.com",
                "ok",
            )
        },
        case(
            "expired leaf",
            &["root"],
            &["leaf-expired", "int"],
            "www.example.com",
            "expired",
        ),
        // notAfter is inclusive (RFC 5280, 4.1.2.5).
        Case {
            depth: 3,
            time: LEAF_NOT_AFTER,
            ..case(
                "at the leaf's notAfter",
                &["root"],
                &["leaf", "int"],
                "www.example.com",
                "ok",
            )
        },
        Case {
            time: LEAF_NOT_AFTER + 1,
            ..case(
                "a second after the leaf's notAfter",
                &["root"],
                &["leaf", "int"],
                "www.example.com",
                "expired",
            )
        },
        case(
            "not yet valid leaf",
            &["root"],
            &["leaf-future", "int"],
            "www.example.com",
            "not_yet_valid",
        ),
        Case {
            time: 1_700_000_000,
            ..case(
                "before every notBefore",
                &["root"],
                &["leaf", "int"],
                "www.example.com",
                "not_yet_valid",
            )
        },
        case(
            "wrong name",
            &["root"],
            &["leaf", "int"],
            "other.example.com",
            "name_mismatch",
        ),
        case(
            "wrong IP",
            &["root"],
            &["leaf", "int"],
            "127.0.0.2",
            "name_mismatch",
        ),
        case(
            "host not a name",
            &["root"],
            &["leaf", "int"],
            "not a host!",
            "name_mismatch",
        ),
        case(
            "unknown root",
            &["other-root"],
            &["leaf", "int"],
            "www.example.com",
            "unknown_issuer",
        ),
        case(
            "missing intermediate",
            &["root"],
            &["leaf"],
            "www.example.com",
            "unknown_issuer",
        ),
        // The path fails and the name is wrong: the path's error wins.
        case(
            "unknown root and wrong name",
            &["other-root"],
            &["leaf", "int"],
            "other.example.com",
            "unknown_issuer",
        ),
        case(
            "bad signature",
            &["root"],
            &["leaf-badsig", "int"],
            "www.example.com",
            "bad_signature",
        ),
        case(
            "name constraints",
            &["root"],
            &["nc-leaf-bad", "nc-int"],
            "www.forbidden.example",
            "name_constraints",
        ),
        Case {
            depth: 3,
            ..case(
                "within name constraints",
                &["root"],
                &["nc-leaf-ok", "nc-int"],
                "www.allowed.example",
                "ok",
            )
        },
        case(
            "path length",
            &["root"],
            &["pl-leaf", "pl-int2", "pl-int1"],
            "www.example.com",
            "path_length",
        ),
        case(
            "leaf used as CA",
            &["root"],
            &["leaf-by-leaf", "leaf", "int"],
            "sub.example.com",
            "not_ca",
        ),
        case("CA used as leaf", &["root"], &["int"], "", "not_ca"),
        case(
            "client-only leaf for a server",
            &["root"],
            &["leaf-client", "int"],
            "client.example.com",
            "bad_usage",
        ),
        Case {
            depth: 3,
            purpose: "client",
            ..case(
                "client leaf for a client",
                &["root"],
                &["leaf-client", "int"],
                "client.example.com",
                "ok",
            )
        },
        Case {
            purpose: "client",
            ..case(
                "server leaf for a client",
                &["root"],
                &["leaf", "int"],
                "www.example.com",
                "bad_usage",
            )
        },
        case(
            "unknown critical extension",
            &["root"],
            &["leaf-critext", "int"],
            "www.example.com",
            "unsupported",
        ),
        case(
            "SHA-1 signature",
            &["root"],
            &["leaf-sha1", "int"],
            "www.example.com",
            "unsupported",
        ),
        // ring verifies RSA signatures only from 2048-bit keys, and webpki
        // reports the refusal as a signature that does not verify.
        Case {
            depth: 3,
            ..case(
                "RSA-1024 leaf key",
                &["root"],
                &["leaf-rsa1024", "int"],
                "www.example.com",
                "ok",
            )
        },
        case(
            "RSA-1024 root",
            &["rsa1024-root"],
            &["rsa1024-leaf"],
            "www.example.com",
            "bad_signature",
        ),
        Case {
            chain: vec![truncated, one("int")],
            ..case(
                "truncated leaf",
                &["root"],
                &[],
                "www.example.com",
                "malformed",
            )
        },
        Case {
            chain: vec![b64(b"not a certificate")],
            ..case(
                "garbage leaf",
                &["root"],
                &[],
                "www.example.com",
                "malformed",
            )
        },
        case(
            "path building budget",
            &["root"],
            &["limits-leaf", "limits-intermediates"],
            "www.example.com",
            "limits",
        ),
        case(
            "mesh refused before path building",
            &["root"],
            &["mesh-leaf", "mesh-intermediates"],
            "www.example.com",
            "limits",
        ),
    ];
    let (mut h, _) = Helper::start();
    let mut table = String::new();
    for (i, c) in cases.iter().enumerate() {
        let id = 100 + i as u64;
        let a = h.send(&request(id, &c.roots, &c.chain, c.host, c.time, c.purpose));
        table.push_str(&format!(
            "{:45} {:15} {}\n",
            c.name,
            a["code"].as_str().unwrap_or("?"),
            a["reason"]
        ));
        assert_eq!(a["id"], id, "{}: {a}", c.name);
        assert_eq!(a["code"], c.code, "{}: {a}", c.name);
        assert_eq!(a["valid"], c.code == "ok", "{}: {a}", c.name);
        assert_eq!(a["depth"], c.depth, "{}: {a}", c.name);
        assert_eq!(a["roots_skipped"], 0, "{}: {a}", c.name);
        let phases = &a["phases"];
        for p in ["roots_ns", "chain_ns", "verify_ns", "hostname_ns"] {
            assert!(phases[p].is_u64(), "{}: {p} in {a}", c.name);
        }
        if c.code == "ok" {
            assert_eq!(a["reason"], "", "{}: {a}", c.name);
            assert!(phases["verify_ns"].as_u64() > Some(0), "{}: {a}", c.name);
        } else {
            assert_ne!(a["reason"], "", "{}: {a}", c.name);
        }
        // The hostname is matched only after the path verified.
        if c.host.is_empty() || !matches!(c.code, "ok" | "name_mismatch") {
            assert_eq!(phases["hostname_ns"], 0, "{}: {a}", c.name);
        }
    }
    println!("{table}");
    let (status, _) = h.finish();
    assert!(status.success());
}

/// The mesh (62 CAs of one name issuing one another, no path to a root) is
/// refused by the helper's own bound before webpki runs, while the layered
/// fixture, within that bound, still meets webpki's own signature budget,
/// and an ordinary chain still verifies after both.
#[test]
fn mesh_is_refused_before_path_building() {
    let (mut h, _) = Helper::start();
    let mut mesh = pem("mesh-leaf");
    mesh.extend(pem("mesh-intermediates"));
    assert_eq!(mesh.len(), 63);
    let start = Instant::now();
    let a = h.send(&request(
        1,
        &pem("root"),
        &mesh,
        "www.example.com",
        T,
        "server",
    ));
    let took = start.elapsed();
    assert_eq!(a["code"], "limits", "{a}");
    assert_eq!(a["valid"], false, "{a}");
    let reason = a["reason"].as_str().expect("reason");
    assert!(
        reason.starts_with("path building refused by the helper before webpki ran"),
        "{reason}"
    );
    assert_eq!(a["phases"]["verify_ns"], 0, "webpki was called: {a}");
    // The refusal takes well under a millisecond; the bound only guards
    // against path building having run (seconds in this debug build).
    assert!(took < Duration::from_secs(2), "answered in {took:?}");

    let mut layered = pem("limits-leaf");
    layered.extend(pem("limits-intermediates"));
    let a = h.send(&request(
        2,
        &pem("root"),
        &layered,
        "www.example.com",
        T,
        "server",
    ));
    assert_eq!(a["code"], "limits", "{a}");
    assert_eq!(a["reason"], "MaximumSignatureChecksExceeded", "{a}");

    let a = h.send(&request(
        3,
        &pem("root"),
        &[one("leaf"), one("int")],
        "www.example.com",
        T,
        "server",
    ));
    assert_eq!(a["code"], "ok", "{a}");
    let (status, _) = h.finish();
    assert!(status.success());
}

#[test]
fn host_that_is_not_a_name_says_so() {
    let (mut h, _) = Helper::start();
    let a = h.send(&request(
        1,
        &pem("root"),
        &[one("leaf"), one("int")],
        "not a host!",
        T,
        "server",
    ));
    assert_eq!(a["code"], "name_mismatch");
    let reason = a["reason"].as_str().expect("reason");
    assert!(
        reason.contains("neither a DNS name nor an IP address"),
        "{reason}"
    );
}

#[test]
fn unparsable_roots_are_skipped_and_counted() {
    let (mut h, _) = Helper::start();
    let roots = vec![b64(b"junk"), one("root"), one("leaf-badsig")];
    let a = h.send(&request(
        5,
        &roots,
        &[one("leaf"), one("int")],
        "www.example.com",
        T,
        "server",
    ));
    // leaf-badsig parses as a certificate, so only the junk is skipped.
    assert_eq!(a["roots_skipped"], 1, "{a}");
    assert_eq!(a["code"], "ok", "{a}");
    let a = h.send(&request(
        6,
        &[b64(b"junk")],
        &[one("leaf"), one("int")],
        "",
        T,
        "server",
    ));
    assert_eq!(a["roots_skipped"], 1, "{a}");
    assert_eq!(a["code"], "unknown_issuer", "{a}");
}

#[test]
fn error_answers() {
    let leaf = one("leaf");
    let root = one("root");
    let too_many_roots: Vec<String> = (0..4097).map(|_| root.clone()).collect();
    let too_many_chain: Vec<String> = (0..65).map(|_| leaf.clone()).collect();
    let cases: Vec<(&str, Vec<u8>, u64, &str)> = vec![
        ("not JSON", b"{\"id\":3,".to_vec(), 0, "not JSON"),
        ("not an object", b"[1,2]".to_vec(), 0, "not a JSON object"),
        ("empty line", b"".to_vec(), 0, "not JSON"),
        ("no id", json!({"roots": [root], "chain": [leaf], "time": T, "purpose": "server"}).to_string().into_bytes(), 0, "missing field id"),
        ("negative id", json!({"id": -1}).to_string().into_bytes(), 0, "id is not"),
        ("no roots", json!({"id": 7, "chain": [leaf], "time": T, "purpose": "server"}).to_string().into_bytes(), 7, "missing field roots"),
        ("empty roots", json!({"id": 8, "roots": [], "chain": [leaf], "time": T, "purpose": "server"}).to_string().into_bytes(), 8, "roots is empty"),
        ("empty chain", json!({"id": 9, "roots": [root], "chain": [], "time": T, "purpose": "server"}).to_string().into_bytes(), 9, "chain is empty"),
        ("bad base64", json!({"id": 10, "roots": [root], "chain": ["%%%"], "time": T, "purpose": "server"}).to_string().into_bytes(), 10, "chain[0] is not standard base64"),
        ("url-safe base64", json!({"id": 11, "roots": ["-_-_"], "chain": [leaf], "time": T, "purpose": "server"}).to_string().into_bytes(), 11, "roots[0] is not standard base64"),
        ("unknown purpose", json!({"id": 12, "roots": [root], "chain": [leaf], "time": T, "purpose": "codeSigning"}).to_string().into_bytes(), 12, "unknown purpose"),
        ("no purpose", json!({"id": 13, "roots": [root], "chain": [leaf], "time": T}).to_string().into_bytes(), 13, "missing field purpose"),
        ("negative time", json!({"id": 14, "roots": [root], "chain": [leaf], "time": -5, "purpose": "server"}).to_string().into_bytes(), 14, "time is not"),
        ("too many roots", json!({"id": 15, "roots": too_many_roots, "chain": [leaf], "time": T, "purpose": "server"}).to_string().into_bytes(), 15, "more than the 4096"),
        ("too many chain certs", json!({"id": 16, "roots": [root], "chain": too_many_chain, "time": T, "purpose": "server"}).to_string().into_bytes(), 16, "more than the 64"),
        ("host not a string", json!({"id": 17, "roots": [root], "chain": [leaf], "host": 5, "time": T, "purpose": "server"}).to_string().into_bytes(), 17, "host is not a string"),
    ];
    let (mut h, _) = Helper::start();
    for (name, line, id, want) in cases {
        let a = h.send_raw(&line);
        assert_eq!(a["id"], id, "{name}: {a}");
        assert!(
            a.get("valid").is_none(),
            "{name}: an error answer has no verdict: {a}"
        );
        let err = a["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no error in {a}"));
        assert!(err.contains(want), "{name}: error {err:?} lacks {want:?}");
    }
    // The helper is still serving after all of them.
    let a = h.send(&request(
        99,
        &pem("root"),
        &[one("leaf"), one("int")],
        "www.example.com",
        T,
        "server",
    ));
    assert_eq!(a["code"], "ok", "{a}");
    let (status, _) = h.finish();
    assert!(status.success());
}

#[test]
fn overlong_line_is_refused_and_the_next_answered() {
    let (mut h, _) = Helper::start();
    // A request just over 16 MiB: a valid JSON prefix, then padding.
    let mut line = br#"{"id":1,"pad":""#.to_vec();
    line.resize((16 << 20) + 1, b'a');
    let a = h.send_raw(&line);
    assert_eq!(a["id"], 0, "{a}");
    assert!(
        a["error"]
            .as_str()
            .unwrap_or("")
            .contains("longer than 16777216 bytes"),
        "{a}"
    );
    let a = h.send(&request(
        2,
        &pem("root"),
        &[one("leaf"), one("int")],
        "www.example.com",
        T,
        "server",
    ));
    assert_eq!(a["id"], 2, "{a}");
    assert_eq!(a["code"], "ok", "{a}");
}

#[test]
fn last_line_without_newline_is_answered_then_exit_zero() {
    let (mut h, _) = Helper::start();
    let req = request(
        4,
        &pem("root"),
        &[one("leaf"), one("int")],
        "www.example.com",
        T,
        "server",
    );
    let stdin = h.stdin.as_mut().expect("stdin");
    stdin.write_all(req.to_string().as_bytes()).expect("write");
    let (status, rest) = h.finish();
    assert!(status.success(), "{status}");
    let a: Value = serde_json::from_str(rest.trim_end()).expect("one answer");
    assert_eq!(a["id"], 4);
    assert_eq!(a["code"], "ok");
}
