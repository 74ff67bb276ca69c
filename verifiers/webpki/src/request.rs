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
        Some(v) => v
            .as_u64()
            .ok_or_else(|| reject("time is not a non-negative integer (Unix seconds)".to_owned()))?,
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
        return Err(format!("{key} is empty (at least one certificate is needed)"));
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
