//! `camel data` without a network: a tiny HTTP server on 127.0.0.1 serves a good file, one
//! with a wrong checksum, one cut short and a 404, and the fetcher must keep only the good one.
//! No test here reaches any other address.

mod common;
use camel_models::data::fetch::{
    fetch_file, known_set, verify_file, FetchError, Fetched, FileStatus, KnownFile, KNOWN_SETS,
};
use common::{camel, TempDir};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;

/// Serves, forever on a background thread, `/good/<name>` (the body), `/bad/<name>` (same size,
/// one byte changed), `/short/<name>` (the full Content-Length, half the body, then close)
/// and 404 for anything else. Returns `http://127.0.0.1:PORT`.
fn serve(body: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            // drain the headers
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let path = request.split_whitespace().nth(1).unwrap_or("").to_string();
            let head = |len: usize| {
                format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n")
            };
            let _ = if path.starts_with("/good/") {
                stream
                    .write_all(head(body.len()).as_bytes())
                    .and_then(|_| stream.write_all(&body))
            } else if path.starts_with("/bad/") {
                let mut bad = body.clone();
                bad[0] ^= 1;
                stream
                    .write_all(head(bad.len()).as_bytes())
                    .and_then(|_| stream.write_all(&bad))
            } else if path.starts_with("/short/") {
                stream
                    .write_all(head(body.len()).as_bytes())
                    .and_then(|_| stream.write_all(&body[..body.len() / 2]))
            } else {
                stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
            };
            let _ = stream.flush();
        }
    });
    format!("http://{addr}")
}

fn body() -> Vec<u8> {
    (0..100_000u32).map(|i| (i * 7 + i / 13) as u8).collect()
}

fn known(body: &[u8]) -> KnownFile {
    // hashed in memory: tests run in parallel, so a shared temporary file would race
    let sha: String = Sha256::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    KnownFile {
        name: "f.bin",
        bytes: body.len() as u64,
        sha256: Box::leak(sha.into_boxed_str()),
    }
}

fn failure(e: FetchError) -> Vec<String> {
    match e {
        FetchError::AllFailed { tries, .. } => tries,
        other => panic!("expected AllFailed, got {other:?}"),
    }
}

#[test]
fn good_file_is_fetched_and_verified() {
    let (b, server, tmp) = (body(), serve(body()), TempDir::new("good"));
    let f = known(&b);
    let mut seen = 0;
    let got = fetch_file(&[format!("{server}/good/")], &f, &tmp.0, |d, _| seen = d).unwrap();
    assert_eq!(got, Fetched::Downloaded(format!("{server}/good/f.bin")));
    assert_eq!(seen, b.len() as u64);
    assert_eq!(std::fs::read(tmp.0.join("f.bin")).unwrap(), b);
    assert_eq!(tmp.entries(), ["f.bin"], "no temporary file left");
    // a second fetch finds it in place and downloads nothing (the URL answers 404)
    let again = fetch_file(&[format!("{server}/none/")], &f, &tmp.0, |_, _| {}).unwrap();
    assert_eq!(again, Fetched::AlreadyPresent);
}

#[test]
fn wrong_checksum_leaves_nothing() {
    let (b, server, tmp) = (body(), serve(body()), TempDir::new("bad"));
    let tries = failure(
        fetch_file(&[format!("{server}/bad/")], &known(&b), &tmp.0, |_, _| {}).unwrap_err(),
    );
    assert_eq!(tries.len(), 1);
    assert!(tries[0].contains("SHA-256 mismatch"), "{tries:?}");
    assert!(tmp.entries().is_empty(), "{:?}", tmp.entries());
}

#[test]
fn cut_short_download_leaves_nothing() {
    let (b, server, tmp) = (body(), serve(body()), TempDir::new("short"));
    let tries = failure(
        fetch_file(&[format!("{server}/short/")], &known(&b), &tmp.0, |_, _| {}).unwrap_err(),
    );
    assert!(
        tries[0].contains("cut short") || tries[0].contains("connection failed"),
        "{tries:?}"
    );
    assert!(tmp.entries().is_empty(), "{:?}", tmp.entries());
}

#[test]
fn not_found_is_reported_and_the_next_mirror_is_tried() {
    let (b, server, tmp) = (body(), serve(body()), TempDir::new("404"));
    let f = known(&b);
    let tries =
        failure(fetch_file(&[format!("{server}/missing/")], &f, &tmp.0, |_, _| {}).unwrap_err());
    assert!(tries[0].contains("HTTP 404"), "{tries:?}");
    assert!(tmp.entries().is_empty());
    // a list of URLs: the 404, the corrupt and the short one fail, the mirror after them works
    let bases = ["missing", "bad", "short", "good"].map(|p| format!("{server}/{p}/"));
    let got = fetch_file(&bases, &f, &tmp.0, |_, _| {}).unwrap();
    assert_eq!(got, Fetched::Downloaded(format!("{server}/good/f.bin")));
    assert_eq!(tmp.entries(), ["f.bin"]);
}

#[test]
fn verify_reports_ok_missing_and_mismatch() {
    let (b, tmp) = (body(), TempDir::new("verify"));
    let f = known(&b);
    let path = tmp.0.join("f.bin");
    assert_eq!(verify_file(&path, f.sha256).unwrap(), FileStatus::Missing);
    std::fs::write(&path, &b).unwrap();
    assert_eq!(verify_file(&path, f.sha256).unwrap(), FileStatus::Ok);
    std::fs::write(&path, b"changed").unwrap();
    assert!(matches!(
        verify_file(&path, f.sha256).unwrap(),
        FileStatus::Mismatch(_)
    ));
}

#[test]
fn known_sets_are_listed_and_match_the_committed_checksums() {
    let names: Vec<&str> = KNOWN_SETS.iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        ["mnist", "fashion-mnist", "cifar-10", "tinyshakespeare"]
    );
    assert!(matches!(
        known_set("imagenet"),
        Err(FetchError::Unknown { .. })
    ));
    // datasets/SHA256SUMS and the table agree for the committed sets
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets");
    let sums = std::fs::read_to_string(root.join("SHA256SUMS")).unwrap();
    for set in KNOWN_SETS.iter().filter(|s| s.committed) {
        for f in set.files {
            let line = format!("{}  {}/{}", f.sha256, set.name, f.name);
            assert!(sums.lines().any(|l| l == line), "{line} not in SHA256SUMS");
        }
    }
}

#[test]
fn cli_fetch_list_and_verify() {
    // the committed Tiny Shakespeare, served locally, stands in for the canonical URL
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets");
    let text = std::fs::read(root.join("tinyshakespeare/input.txt")).unwrap();
    let server = serve(text.clone());
    let tmp = TempDir::new("cli");
    let dir = tmp.0.to_str().unwrap();

    let out = camel(&["--json", "data", "list", "--data-dir", dir]);
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[3]["name"], "tinyshakespeare");
    assert_eq!(lines[3]["present"], false);

    let bad = camel(&[
        "data",
        "fetch",
        "tinyshakespeare",
        "--data-dir",
        dir,
        "--from",
        &format!("{server}/short/"),
    ]);
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("could not download"), "{err}");
    assert!(!tmp.0.join("tinyshakespeare/input.txt").exists());

    let ok = camel(&[
        "--quiet",
        "data",
        "fetch",
        "tinyshakespeare",
        "--data-dir",
        dir,
        "--from",
        &format!("{server}/good/"),
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(
        std::fs::read(tmp.0.join("tinyshakespeare/input.txt")).unwrap(),
        text
    );

    let out = camel(&["data", "verify", "tinyshakespeare", "--data-dir", dir]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(tmp.0.join("tinyshakespeare/input.txt"), b"changed").unwrap();
    let out = camel(&["data", "verify", "tinyshakespeare", "--data-dir", dir]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("input.txt") && stdout.contains("MISMATCH"),
        "{stdout}"
    );

    let out = camel(&[
        "data",
        "fetch",
        "cifar-10",
        "--data-dir",
        dir,
        "--from",
        &format!("{server}/good/"),
    ]);
    // the served text is not the CIFAR-10 archive: refused by size, nothing written
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cifar-10-binary.tar.gz") && err.contains("wrong size"),
        "{err}"
    );
    assert!(!tmp.0.join("cifar-10/cifar-10-binary.tar.gz").exists());
    assert!(!tmp.0.join("cifar-10/cifar-10-batches-bin").exists());
}
