//! pkie-verify-webpki: pkie's certificate verification helper backed by
//! rustls-webpki, speaking pkie-verify/1 (docs/formats/notary-and-tools.md, "Verifier helper
//! protocol"): a hello line, then one JSON answer line per request line.

mod codes;
mod request;
mod work;

use std::io::{self, BufRead, BufReader, Write};
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rustls_pki_types::{CertificateDer, ServerName, TrustAnchor, UnixTime};
use serde_json::Value;
use webpki::{EndEntityCert, KeyUsage};

use request::{Purpose, Reject, Request};

/// The version of rustls-webpki this binary was built with, from Cargo.lock
/// (build.rs).
const WEBPKI_VERSION: &str = env!("PKIE_WEBPKI_VERSION");

/// The longest request line read, newline excluded (the protocol's bound).
const MAX_LINE: usize = 16 << 20;

/// The most bytes of a library message put in an answer's reason, well
/// under the protocol's 64 KiB answer bound.
const MAX_REASON: usize = 1024;

fn main() -> ExitCode {
    let stdin = io::stdin();
    let mut input = BufReader::with_capacity(1 << 16, stdin.lock());
    let stdout = io::stdout();
    let mut out = stdout.lock();
    match serve(&mut input, &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pkie-verify-webpki: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The hello line's library field.
fn library() -> String {
    format!("rustls-webpki {WEBPKI_VERSION} (ring)")
}

/// Writes the hello, then answers every request line of `input` until its
/// end. Only I/O errors end it early; a bad request gets an error answer.
fn serve(input: &mut impl BufRead, out: &mut impl Write) -> io::Result<()> {
    write_line(out, &hello())?;
    let mut line = Vec::new();
    loop {
        let answer = match read_line(input, &mut line, MAX_LINE)? {
            Line::End => return Ok(()),
            Line::TooLong => error_answer(&Reject {
                id: 0,
                error: format!("request longer than {MAX_LINE} bytes; discarded"),
            }),
            Line::Full => answer(&line),
        };
        write_line(out, &answer)?;
    }
}

fn write_line(out: &mut impl Write, line: &str) -> io::Result<()> {
    out.write_all(line.as_bytes())?;
    out.write_all(b"\n")?;
    // pkie waits for each answer before it sends the next request.
    out.flush()
}

enum Line {
    /// `buf` holds one line, newline removed.
    Full,
    /// The line was longer than the bound; it has been read and dropped.
    TooLong,
    /// End of input and nothing left.
    End,
}

/// Reads one `\n`-terminated line into `buf`, holding at most `max` bytes of
/// it in memory. A last line without a newline counts as a line.
fn read_line(input: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        let chunk = match input.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(match (any, too_long) {
                (false, _) => Line::End,
                (true, true) => Line::TooLong,
                (true, false) => Line::Full,
            });
        }
        any = true;
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        input.consume(if done { take + 1 } else { take });
        if done {
            return Ok(if too_long { Line::TooLong } else { Line::Full });
        }
    }
}

// The lines are written by hand rather than through a serde_json Map so
// that their fields keep the order docs/formats/notary-and-tools.md shows (protocol first,
// id first) without serde_json's preserve_order dependencies.

/// A JSON string literal for `s`.
fn quote(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// The hello line.
fn hello() -> String {
    format!(
        r#"{{"protocol":"pkie-verify/1","backend":"webpki","library":{}}}"#,
        quote(&library())
    )
}

fn error_answer(r: &Reject) -> String {
    format!(
        r#"{{"id":{},"error":{}}}"#,
        r.id,
        quote(request::bounded(&r.error, MAX_REASON))
    )
}

/// The answer line for one request line.
fn answer(line: &[u8]) -> String {
    let req = match request::parse(line) {
        Ok(req) => req,
        Err(r) => return error_answer(&r),
    };
    // Nothing here unwraps input-derived data, but webpki and ring parse
    // hostile DER: should they panic, that request gets an error answer
    // naming the panic and the helper goes on serving the next one.
    match panic::catch_unwind(AssertUnwindSafe(|| verify(&req))) {
        Ok(v) => verdict_answer(req.id, &v),
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            error_answer(&Reject {
                id: req.id,
                error: format!("verification panicked: {what}"),
            })
        }
    }
}

fn verdict_answer(id: u64, v: &Verdict) -> String {
    format!(
        concat!(
            r#"{{"id":{},"valid":{},"code":{},"reason":{},"depth":{},"roots_skipped":{},"#,
            r#""phases":{{"roots_ns":{},"chain_ns":{},"verify_ns":{},"hostname_ns":{}}}}}"#
        ),
        id,
        v.valid,
        quote(v.code),
        quote(request::bounded(&v.reason, MAX_REASON)),
        v.depth,
        v.roots_skipped,
        v.roots_ns,
        v.chain_ns,
        v.verify_ns,
        v.hostname_ns,
    )
}

/// One verdict and the time each phase took.
#[derive(Debug, Default)]
struct Verdict {
    valid: bool,
    code: &'static str,
    reason: String,
    depth: usize,
    roots_skipped: usize,
    roots_ns: u128,
    chain_ns: u128,
    verify_ns: u128,
    hostname_ns: u128,
}

impl Verdict {
    fn fail(mut self, code: &'static str, reason: String) -> Self {
        self.valid = false;
        self.code = code;
        self.reason = reason;
        self
    }
}

/// Verifies `req` with webpki, timing each phase around webpki's calls only.
fn verify(req: &Request) -> Verdict {
    let mut v = Verdict::default();

    // Roots. A TrustAnchor borrows the certificate's DER, so the DER wrappers
    // live in their own vector, alive as long as the anchors.
    let start = Instant::now();
    let root_ders: Vec<CertificateDer<'_>> = req
        .roots
        .iter()
        .map(|r| CertificateDer::from(r.as_slice()))
        .collect();
    let mut anchors: Vec<TrustAnchor<'_>> = Vec::with_capacity(root_ders.len());
    for der in &root_ders {
        match webpki::anchor_from_trusted_cert(der) {
            Ok(a) => anchors.push(a),
            Err(_) => v.roots_skipped += 1,
        }
    }
    v.roots_ns = start.elapsed().as_nanos();

    // Chain: the leaf parsed for webpki, the rest passed as candidates
    // (webpki parses those while building paths).
    let start = Instant::now();
    let chain_ders: Vec<CertificateDer<'_>> = req
        .chain
        .iter()
        .map(|c| CertificateDer::from(c.as_slice()))
        .collect();
    let (leaf_der, intermediates) = match chain_ders.split_first() {
        Some(split) => split,
        None => {
            // request::parse refuses an empty chain; kept as a verdict
            // rather than a panic all the same.
            v.chain_ns = start.elapsed().as_nanos();
            return v.fail("malformed", "empty chain".to_owned());
        }
    };
    let leaf = match EndEntityCert::try_from(leaf_der) {
        Ok(l) => l,
        Err(e) => {
            v.chain_ns = start.elapsed().as_nanos();
            return v.fail(codes::code_for(&e), format!("leaf certificate: {e:?}"));
        }
    };
    // The candidates are parsed here once, with webpki's own parser, only
    // to bound the path search below (work.rs); webpki parses them again
    // while it builds paths.
    let parsed: Vec<Option<EndEntityCert<'_>>> = intermediates
        .iter()
        .map(|c| EndEntityCert::try_from(c).ok())
        .collect();
    let spkis: Vec<Option<_>> = parsed
        .iter()
        .map(|c| c.as_ref().map(|c| c.subject_public_key_info()))
        .collect();
    let nodes: Vec<Option<work::Node<'_>>> = parsed
        .iter()
        .zip(&spkis)
        .map(|(c, spki)| match (c, spki) {
            (Some(c), Some(spki)) => Some(work::Node {
                subject: c.subject(),
                issuer: c.issuer(),
                spki: spki.as_ref(),
            }),
            _ => None,
        })
        .collect();
    let leaf_spki = leaf.subject_public_key_info();
    let leaf_node = work::Node {
        subject: leaf.subject(),
        issuer: leaf.issuer(),
        spki: leaf_spki.as_ref(),
    };
    let candidate_bytes: u64 = intermediates.iter().map(|c| c.as_ref().len() as u64).sum();
    let estimate = work::estimate(
        &leaf_node,
        &nodes,
        candidate_bytes,
        anchors.iter().map(|a| a.subject.as_ref().len()),
    );
    v.chain_ns = start.elapsed().as_nanos();
    if estimate.work > work::MAX_WORK {
        return v.fail(
            "limits",
            format!(
                "path building refused by the helper before webpki ran: up to {} paths by name, each re-reading {} units of candidates and anchors, is more than its bound of {} units of work",
                estimate.calls, estimate.per_call, work::MAX_WORK
            ),
        );
    }

    // Path building, signatures, validity and EKU.
    let usage = match req.purpose {
        Purpose::Server => KeyUsage::server_auth(),
        Purpose::Client => KeyUsage::client_auth(),
    };
    let time = UnixTime::since_unix_epoch(Duration::from_secs(req.time));
    let start = Instant::now();
    let path = leaf.verify_for_usage(
        webpki::ALL_VERIFICATION_ALGS,
        &anchors,
        intermediates,
        time,
        usage,
        None,
        None,
    );
    v.verify_ns = start.elapsed().as_nanos();
    let path = match path {
        Ok(p) => p,
        Err(e) => return v.fail(codes::code_for(&e), format!("{e:?}")),
    };
    // Leaf, intermediates, anchor.
    let depth = 2 + path.intermediate_certificates().count();

    if !req.host.is_empty() {
        let start = Instant::now();
        let checked = match ServerName::try_from(req.host.as_str()) {
            Ok(name) => leaf
                .verify_is_valid_for_subject_name(&name)
                .map_err(|e| (codes::code_for(&e), format!("{e:?}"))),
            Err(e) => Err((
                "name_mismatch",
                format!(
                    "host {:?} is neither a DNS name nor an IP address: {e}",
                    request::bounded(&req.host, 256)
                ),
            )),
        };
        v.hostname_ns = start.elapsed().as_nanos();
        if let Err((code, reason)) = checked {
            return v.fail(code, reason);
        }
    }

    v.valid = true;
    v.code = "ok";
    v.depth = depth;
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize, cap: usize) -> Vec<Result<Vec<u8>, &'static str>> {
        // A small buffer capacity makes lines span many fill_buf calls.
        let mut r = BufReader::with_capacity(cap, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            match read_line(&mut r, &mut buf, max).expect("in-memory read") {
                Line::End => return out,
                Line::TooLong => out.push(Err("too long")),
                Line::Full => out.push(Ok(buf.clone())),
            }
        }
    }

    #[test]
    fn read_line_splits_and_bounds() {
        for cap in [1, 3, 64] {
            assert_eq!(
                lines(b"ab\n\ncdef\nxyz", 4, cap),
                vec![
                    Ok(b"ab".to_vec()),
                    Ok(vec![]),
                    Ok(b"cdef".to_vec()),
                    Ok(b"xyz".to_vec())
                ],
                "cap {cap}"
            );
            assert_eq!(
                lines(b"abcde\nok\nabcdefgh", 4, cap),
                vec![Err("too long"), Ok(b"ok".to_vec()), Err("too long")],
                "cap {cap}"
            );
            assert_eq!(lines(b"", 4, cap), vec![]);
        }
    }

    #[test]
    fn serve_writes_hello_then_one_answer_per_line() {
        let mut out = Vec::new();
        serve(&mut &b"nope\n{\"id\":9}\n"[..], &mut out).expect("serve");
        let text = String::from_utf8(out).expect("UTF-8");
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(
            got,
            vec![
                format!(
                    r#"{{"protocol":"pkie-verify/1","backend":"webpki","library":"rustls-webpki {WEBPKI_VERSION} (ring)"}}"#
                )
                .as_str(),
                r#"{"id":0,"error":"request is not JSON: expected ident at line 1 column 2"}"#,
                r#"{"id":9,"error":"missing field roots"}"#,
            ]
        );
    }

    #[test]
    fn verdict_answer_field_order_and_escaping() {
        let v = Verdict {
            valid: false,
            code: "other",
            reason: "a \"quoted\"\nline".to_owned(),
            roots_skipped: 2,
            roots_ns: 1,
            chain_ns: 2,
            verify_ns: 3,
            hostname_ns: 0,
            ..Verdict::default()
        };
        assert_eq!(
            verdict_answer(u64::MAX, &v),
            concat!(
                r#"{"id":18446744073709551615,"valid":false,"code":"other","reason":"a \"quoted\"\nline","#,
                r#""depth":0,"roots_skipped":2,"phases":{"roots_ns":1,"chain_ns":2,"verify_ns":3,"hostname_ns":0}}"#
            )
        );
    }

    #[test]
    fn reason_is_bounded() {
        let v = Verdict {
            code: "other",
            reason: "x".repeat(100_000),
            ..Verdict::default()
        };
        let a = verdict_answer(1, &v);
        assert!(a.len() < MAX_REASON + 200, "{} bytes", a.len());
    }

    /// xorshift64*: a fixed sequence, so a failure reproduces.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn pem_body(pem: &str) -> String {
        pem.lines().filter(|l| !l.starts_with("-----")).collect()
    }

    fn mutate(rng: &mut Rng, mut b: Vec<u8>) -> Vec<u8> {
        for _ in 0..1 + rng.below(4) {
            if b.is_empty() {
                b.push(rng.next() as u8);
                continue;
            }
            let i = rng.below(b.len());
            match rng.below(4) {
                0 => b[i] ^= 1 << rng.below(8),
                1 => b[i] = rng.next() as u8,
                2 => b.truncate(i),
                _ => b.insert(i, rng.next() as u8),
            }
        }
        b
    }

    /// Mutated requests and mutated certificates inside well-formed
    /// requests: every one gets a well-formed answer under its id, never a
    /// panic. (The crate has no cargo-fuzz target: that needs nightly.)
    #[test]
    fn mutated_input_always_gets_an_answer() {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let root = pem_body(include_str!("../testdata/root.pem"));
        let int = pem_body(include_str!("../testdata/int.pem"));
        let leaf = pem_body(include_str!("../testdata/leaf.pem"));
        let nc = pem_body(include_str!("../testdata/nc-int.pem"));
        let der = |s: &str| b64.decode(s).expect("fixture base64");
        let certs = [der(&root), der(&int), der(&leaf), der(&nc)];
        let line = |roots: &[String], chain: &[String]| {
            serde_json::json!({"id": 42, "roots": roots, "chain": chain,
                "host": "www.example.com", "time": 1_767_225_600u64, "purpose": "server"})
            .to_string()
            .into_bytes()
        };
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut verdicts = 0;
        for i in 0..1500 {
            let input = if i % 3 == 0 {
                mutate(
                    &mut rng,
                    line(std::slice::from_ref(&root), &[leaf.clone(), int.clone()]),
                )
            } else {
                // Mutate one certificate's DER: the leaf, an intermediate
                // candidate or the root.
                let mut c: Vec<Vec<u8>> = certs.to_vec();
                let k = rng.below(c.len());
                c[k] = mutate(&mut rng, c[k].clone());
                let e: Vec<String> = c.iter().map(|d| b64.encode(d)).collect();
                line(&[e[0].clone()], &[e[2].clone(), e[1].clone(), e[3].clone()])
            };
            let out = answer(&input);
            let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}: {e}"));
            assert!(v["id"].is_u64(), "{out}");
            if v["error"].is_string() {
                assert!(!out.contains("panicked"), "{out}");
                continue;
            }
            verdicts += 1;
            assert_eq!(v["id"], 42, "{out}");
            let code = v["code"]
                .as_str()
                .unwrap_or_else(|| panic!("no code: {out}"));
            assert_eq!(v["valid"], code == "ok", "{out}");
        }
        // Most mutations of a certificate keep the request well-formed.
        assert!(verdicts > 500, "only {verdicts} verdicts");
    }
}
