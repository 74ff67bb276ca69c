//! Decoding one pkie-verify/1 request line. Everything here is outside the
//! timed phases: the helper measures webpki, not JSON or base64.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{Map, Value};

/// The most trust anchors one request may carry; a browser root store has a
/// few hundred, so more is a mistake, not a use.
pub const MAX_ROOTS: usize = 4096;
/// The most certificates one presented chain may carry (leaf included).
pub const MAX_CHAIN: usize = 64;

/// Whose authentication the leaf must be fit for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    Server,
    Client,
}

/// A decoded request: the DER of every certificate, leaf first in `chain`.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub id: u64,
    pub roots: Vec<Vec<u8>>,
    pub chain: Vec<Vec<u8>>,
    pub host: String,
    pub time: u64,
    pub purpose: Purpose,
}

/// Why a request cannot be acted on, with the id to answer under: the
/// request's own when it could be read, else 0.
#[derive(Debug, PartialEq, Eq)]
pub struct Reject {
    pub id: u64,
    pub error: String,
}

/// Decodes one request line (without its newline).
pub fn parse(line: &[u8]) -> Result<Request, Reject> {
    let value: Value = serde_json::from_slice(line).map_err(|e| Reject {
        id: 0,
        error: format!("request is not JSON: {e}"),
    })?;
    let obj = match value {
        Value::Object(obj) => obj,
        _ => {
            return Err(Reject {
                id: 0,
                error: "request is not a JSON object".to_owned(),
            })
        }
    };
    let id = match obj.get("id") {
        Some(v) => v.as_u64().ok_or_else(|| Reject {
            id: 0,
            error: "id is not an unsigned integer".to_owned(),
        })?,
        None => {
            return Err(Reject {
                id: 0,
                error: "missing field id".to_owned(),
            })
        }
    };
    let reject = |error: String| Reject { id, error };

    let roots = certs(&obj, "roots", MAX_ROOTS).map_err(reject)?;
    let chain = certs(&obj, "chain", MAX_CHAIN).map_err(reject)?;
    // host may be left out: an empty host skips the hostname check anyway.
    let host = match obj.get("host") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(reject("host is not a string".to_owned())),
    };
    let time = match obj.get("time") {
        None => return Err(reject("missing field time".to_owned())),
        Some(v) => v.as_u64().ok_or_else(|| {
            reject("time is not a non-negative integer (Unix seconds)".to_owned())
        })?,
    };
    let purpose = match obj.get("purpose") {
        None => return Err(reject("missing field purpose".to_owned())),
        Some(Value::String(s)) if s == "server" => Purpose::Server,
        Some(Value::String(s)) if s == "client" => Purpose::Client,
        Some(Value::String(s)) => {
            return Err(reject(format!(
                "unknown purpose {:?} (want \"server\" or \"client\")",
                bounded(s, 64)
            )))
        }
        Some(_) => return Err(reject("purpose is not a string".to_owned())),
    };
    Ok(Request {
        id,
        roots,
        chain,
        host,
        time,
        purpose,
    })
}

/// Decodes the non-empty array of base64 DER certificates under `key`.
fn certs(obj: &Map<String, Value>, key: &str, max: usize) -> Result<Vec<Vec<u8>>, String> {
    let arr = match obj.get(key) {
        None => return Err(format!("missing field {key}")),
        Some(Value::Array(arr)) => arr,
        Some(_) => return Err(format!("{key} is not an array")),
    };
    if arr.is_empty() {
        return Err(format!(
            "{key} is empty (at least one certificate is needed)"
        ));
    }
    if arr.len() > max {
        return Err(format!(
            "{key} has {} certificates, more than the {max} this helper accepts",
            arr.len()
        ));
    }
    arr.iter()
        .enumerate()
        .map(|(i, v)| {
            let s = v
                .as_str()
                .ok_or_else(|| format!("{key}[{i}] is not a string"))?;
            STANDARD
                .decode(s)
                .map_err(|e| format!("{key}[{i}] is not standard base64: {e}"))
        })
        .collect()
}

/// Cuts `s` to at most `max` bytes on a character boundary, so that error
/// strings quoting input stay short.
pub fn bounded(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: serde_json::Value) -> Vec<u8> {
        v.to_string().into_bytes()
    }

    #[test]
    fn parses_a_full_request() {
        let line = obj(serde_json::json!({
            "id": 7, "roots": ["AQID"], "chain": ["BAUG", "Bwg="],
            "host": "www.example.com", "time": 1763856000, "purpose": "client",
            "extra": "ignored",
        }));
        assert_eq!(
            parse(&line),
            Ok(Request {
                id: 7,
                roots: vec![vec![1, 2, 3]],
                chain: vec![vec![4, 5, 6], vec![7, 8]],
                host: "www.example.com".to_owned(),
                time: 1763856000,
                purpose: Purpose::Client,
            })
        );
    }

    #[test]
    fn host_may_be_absent_or_null() {
        for host in [None, Some(serde_json::Value::Null)] {
            let mut v = serde_json::json!({"id": 1, "roots": ["AQID"], "chain": ["AQID"], "time": 0, "purpose": "server"});
            if let Some(h) = host {
                v["host"] = h;
            }
            let r = parse(&obj(v)).expect("valid request");
            assert_eq!(r.host, "");
            assert_eq!(r.purpose, Purpose::Server);
        }
    }

    #[test]
    fn rejects() {
        let ok = serde_json::json!({"id": 3, "roots": ["AQID"], "chain": ["AQID"], "host": "", "time": 5, "purpose": "server"});
        let with = |k: &str, v: serde_json::Value| {
            let mut o = ok.clone();
            o[k] = v;
            obj(o)
        };
        let without = |k: &str| {
            let mut o = ok.clone();
            o.as_object_mut().expect("object").remove(k);
            obj(o)
        };
        let cases: Vec<(&str, Vec<u8>, u64, &str)> = vec![
            ("garbage", b"\xff\xfe".to_vec(), 0, "not JSON"),
            ("array", b"[]".to_vec(), 0, "not a JSON object"),
            ("no id", without("id"), 0, "missing field id"),
            (
                "float id",
                with("id", serde_json::json!(1.5)),
                0,
                "id is not",
            ),
            (
                "string id",
                with("id", serde_json::json!("3")),
                0,
                "id is not",
            ),
            ("no roots", without("roots"), 3, "missing field roots"),
            (
                "roots not array",
                with("roots", serde_json::json!("AQID")),
                3,
                "roots is not an array",
            ),
            (
                "root not string",
                with("roots", serde_json::json!([1])),
                3,
                "roots[0] is not a string",
            ),
            ("no chain", without("chain"), 3, "missing field chain"),
            (
                "empty chain",
                with("chain", serde_json::json!([])),
                3,
                "chain is empty",
            ),
            (
                "padding missing",
                with("chain", serde_json::json!(["AQI"])),
                3,
                "chain[0] is not standard base64",
            ),
            (
                "whitespace",
                with("chain", serde_json::json!(["AQ ID"])),
                3,
                "chain[0] is not standard base64",
            ),
            ("no time", without("time"), 3, "missing field time"),
            (
                "string time",
                with("time", serde_json::json!("5")),
                3,
                "time is not",
            ),
            (
                "float time",
                with("time", serde_json::json!(5.5)),
                3,
                "time is not",
            ),
            ("no purpose", without("purpose"), 3, "missing field purpose"),
            (
                "bad purpose",
                with("purpose", serde_json::json!("Server")),
                3,
                "unknown purpose \"Server\"",
            ),
            (
                "purpose not string",
                with("purpose", serde_json::json!(1)),
                3,
                "purpose is not a string",
            ),
            (
                "host not string",
                with("host", serde_json::json!(["a"])),
                3,
                "host is not a string",
            ),
        ];
        for (name, line, id, want) in cases {
            match parse(&line) {
                Ok(r) => panic!("{name}: accepted {r:?}"),
                Err(r) => {
                    assert_eq!(r.id, id, "{name}");
                    assert!(
                        r.error.contains(want),
                        "{name}: {:?} lacks {want:?}",
                        r.error
                    );
                }
            }
        }
    }

    #[test]
    fn bounds_counts() {
        let many = |n: usize| serde_json::Value::Array(vec![serde_json::json!("AQID"); n]);
        let req = |roots: usize, chain: usize| {
            obj(
                serde_json::json!({"id": 1, "roots": many(roots), "chain": many(chain), "time": 0, "purpose": "server"}),
            )
        };
        assert!(parse(&req(MAX_ROOTS, MAX_CHAIN)).is_ok());
        // Matched rather than expect_err: the Debug of 4097 roots is huge.
        let refused = |line: Vec<u8>| match parse(&line) {
            Ok(r) => panic!("accepted {} roots, {} chain", r.roots.len(), r.chain.len()),
            Err(e) => e.error,
        };
        let e = refused(req(MAX_ROOTS + 1, 1));
        assert!(e.contains("roots has 4097 certificates"), "{e}");
        let e = refused(req(1, MAX_CHAIN + 1));
        assert!(e.contains("chain has 65 certificates"), "{e}");
    }

    #[test]
    fn bounded_cuts_on_char_boundaries() {
        assert_eq!(bounded("abc", 5), "abc");
        assert_eq!(bounded("abcdef", 3), "abc");
        // "é" is two bytes: a cut inside it backs off before it.
        assert_eq!(bounded("aé", 2), "a");
        assert_eq!(bounded("", 0), "");
    }
}
