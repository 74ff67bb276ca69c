//! A bound on the work webpki's path building may do for one request,
//! computed before webpki is asked.
//!
//! webpki's own budget stops path building after 100 signature checks or
//! 200,000 candidates tried, but a signature is checked only once a path
//! reaches a trust anchor by name, and every path it extends re-parses
//! every candidate certificate and compares its issuer with every anchor's
//! subject. A chain of a few dozen intermediates that issue one another by
//! name and never reach an anchor (a "mesh") tries all 200,000 candidates,
//! each step over the whole chain: about 0.09 s of CPU for the 24 KB
//! fixture, and tens of seconds when the candidates are dense with
//! extensions. Nothing in webpki's API lets a caller lower that budget or
//! interrupt a call, so the helper bounds the search from outside: it
//! counts the paths the search could extend at most and refuses the
//! request (code `limits`) when those times what each costs exceed
//! [`MAX_WORK`]. A request within the bound gets webpki's verdict
//! unchanged.

/// The most work units (see [`Estimate::work`]) one request may need.
/// At about 2.4 ns of CPU a unit, the cost of parsing extension-dense DER
/// measured on the two-core build machine, this is about 0.12 s of path
/// building. A leaf and one intermediate under one root need about a
/// thousand units, a few tens of thousands under Mozilla's roots; the most
/// any BetterTLS case needs is about 2 million, and the 30-certificate
/// fixture that exhausts webpki's signature budget about 14 million.
pub const MAX_WORK: u64 = 50_000_000;

/// webpki's longest path: at most six intermediates (its
/// `MAX_SUB_CA_COUNT`) between the leaf and the anchor.
const MAX_INTERMEDIATES: usize = 6;

/// The units one candidate or anchor costs per call beyond its bytes: a
/// loop iteration's overhead, so that many tiny items are not free.
const PER_ITEM: u64 = 32;

/// What path building matches certificates by: webpki chains a candidate
/// above a certificate when the candidate's subject equals that
/// certificate's issuer, and skips one whose key and subject are those of
/// a certificate already on the path.
#[derive(Clone, Copy, Debug)]
pub struct Node<'a> {
    pub subject: &'a [u8],
    pub issuer: &'a [u8],
    pub spki: &'a [u8],
}

impl Node<'_> {
    /// Whether webpki would try `above` as the issuer of `self`.
    fn issued_by(&self, above: &Node<'_>) -> bool {
        above.subject == self.issuer && !(above.spki == self.spki && above.subject == self.subject)
    }
}

/// The most path building could cost for one request.
#[derive(Debug, PartialEq, Eq)]
pub struct Estimate {
    /// An upper bound on the paths webpki extends, each one pass over
    /// every candidate and anchor: the leaf alone, and every path by name
    /// of one to six candidates above it. (webpki also refuses a path that
    /// repeats any earlier certificate; only a repeat of the one just below
    /// is left out here, so this may count more, never fewer.)
    pub calls: u64,
    /// What one call costs: every candidate's DER bytes and every anchor's
    /// subject bytes, plus [`PER_ITEM`] for each candidate and anchor.
    pub per_call: u64,
    /// `calls * per_call`, saturating.
    pub work: u64,
}

/// Estimates the work of building paths from `leaf` through `candidates`
/// (None for one that does not parse: it is parsed, and fails, on every
/// call, but chains nothing). `candidate_bytes` is the candidates' total
/// DER length; `anchor_subjects` the length of each anchor's subject.
pub fn estimate(
    leaf: &Node<'_>,
    candidates: &[Option<Node<'_>>],
    candidate_bytes: u64,
    anchor_subjects: impl IntoIterator<Item = usize>,
) -> Estimate {
    let mut per_call =
        candidate_bytes.saturating_add(PER_ITEM.saturating_mul(candidates.len() as u64));
    for len in anchor_subjects {
        per_call = per_call.saturating_add(len as u64).saturating_add(PER_ITEM);
    }

    // paths[j]: the number of paths by name of the current length that end
    // at candidate j. Counting by length rather than searching keeps this
    // at six passes over the pairs of candidates, however many paths there
    // are.
    let n = candidates.len();
    let mut paths: Vec<u64> = candidates
        .iter()
        .map(|c| match c {
            Some(c) if leaf.issued_by(c) => 1,
            _ => 0,
        })
        .collect();
    let mut calls: u64 = 1;
    for depth in 1..=MAX_INTERMEDIATES {
        calls = paths.iter().fold(calls, |acc, &p| acc.saturating_add(p));
        if depth == MAX_INTERMEDIATES {
            break;
        }
        let mut next = vec![0u64; n];
        for (i, below) in candidates.iter().enumerate() {
            let (Some(below), count) = (below, paths[i]) else {
                continue;
            };
            if count == 0 {
                continue;
            }
            for (j, above) in candidates.iter().enumerate() {
                if let Some(above) = above {
                    if below.issued_by(above) {
                        next[j] = next[j].saturating_add(count);
                    }
                }
            }
        }
        paths = next;
    }
    Estimate {
        calls,
        per_call,
        work: calls.saturating_mul(per_call),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node<'a>(subject: &'a str, issuer: &'a str, spki: &'a str) -> Node<'a> {
        Node {
            subject: subject.as_bytes(),
            issuer: issuer.as_bytes(),
            spki: spki.as_bytes(),
        }
    }

    #[test]
    fn counts_paths_by_name() {
        let leaf = node("leaf", "A", "kl");
        let a = node("A", "B", "ka");
        let a2 = node("A", "B", "ka2");
        let b = node("B", "root", "kb");
        let c = node("C", "root", "kc");
        // Self-issued: issuer and subject the same name, another key.
        let m = |k: &'static str| Some(node("M", "M", k));
        let cases: Vec<(&str, Node, Vec<Option<Node>>, u64)> = vec![
            ("no candidates", leaf, vec![], 1),
            ("leaf, A, B", leaf, vec![Some(a), Some(b)], 3),
            (
                "unrelated and unparsable candidates chain nothing",
                leaf,
                vec![Some(c), None],
                1,
            ),
            (
                "two A under one B",
                leaf,
                vec![Some(a), Some(a2), Some(b)],
                5,
            ),
            // A repeated intermediate is tried in both copies.
            ("duplicate A", leaf, vec![Some(a), Some(a), Some(b)], 5),
            // One self-issued CA is not its own issuer.
            ("one self-issued", node("leaf", "M", "kl"), vec![m("k1")], 2),
            // Two self-issued CAs of one name alternate up to six deep.
            (
                "two self-issued",
                node("leaf", "M", "kl"),
                vec![m("k1"), m("k2")],
                13,
            ),
            // Three: 3 + 3*2 + 3*4 + ... + 3*32 paths.
            (
                "three self-issued",
                node("leaf", "M", "kl"),
                vec![m("k1"), m("k2"), m("k3")],
                1 + 3 * 63,
            ),
        ];
        for (name, leaf, cands, want) in cases {
            let e = estimate(&leaf, &cands, 0, []);
            assert_eq!(e.calls, want, "{name}");
        }
    }

    #[test]
    fn work_is_calls_times_bytes_and_items() {
        let leaf = node("leaf", "A", "kl");
        let e = estimate(
            &leaf,
            &[Some(node("A", "root", "ka")), None],
            1000,
            [20, 30],
        );
        assert_eq!(
            e,
            Estimate {
                calls: 2,
                per_call: 1000 + 2 * PER_ITEM + 20 + 30 + 2 * PER_ITEM,
                work: 2 * (1050 + 4 * PER_ITEM),
            }
        );
    }

    #[test]
    fn a_mesh_saturates_instead_of_overflowing() {
        let keys: Vec<String> = (0..63).map(|i| format!("k{i}")).collect();
        let cands: Vec<Option<Node>> = keys.iter().map(|k| Some(node("M", "M", k))).collect();
        let e = estimate(&node("leaf", "M", "kl"), &cands, 28_000, [30]);
        // 63 * 62^5 paths of six alone.
        assert!(e.calls > 50_000_000_000, "{e:?}");
        assert!(e.work > MAX_WORK, "{e:?}");
        let e = estimate(&node("leaf", "M", "kl"), &cands, u64::MAX, [30]);
        assert_eq!(e.work, u64::MAX);
    }
}
