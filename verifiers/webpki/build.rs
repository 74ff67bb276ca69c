//! Reads the resolved rustls-webpki version from Cargo.lock, so the hello
//! line names the library actually linked rather than a string kept by hand.

use std::env;
use std::fs;
use std::path::Path;

fn main() {
    let dir = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let lock = Path::new(&dir).join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    println!("cargo:rerun-if-changed=build.rs");
    let text = fs::read_to_string(&lock)
        .unwrap_or_else(|e| panic!("reading {}: {e} (Cargo.lock is committed)", lock.display()));
    let version = locked_version(&text, "rustls-webpki")
        .unwrap_or_else(|| panic!("{} has no rustls-webpki package", lock.display()));
    println!("cargo:rustc-env=PKIE_WEBPKI_VERSION={version}");
}

/// Returns the version of the one [[package]] named `name` in a Cargo.lock.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let want = format!("name = \"{name}\"");
    let mut in_pkg = false;
    for line in lock.lines() {
        let line = line.trim();
        if line == "[[package]]" {
            in_pkg = false;
        } else if line == want {
            in_pkg = true;
        } else if in_pkg {
            if let Some(v) = line.strip_prefix("version = \"") {
                return v.strip_suffix('"').map(str::to_owned);
            }
        }
    }
    None
}
