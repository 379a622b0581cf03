//! The `camel` program as a user runs it: arguments checked before any data is read, run
//! folders that reload, `--json` output, and a closed pipe that ends quietly.

mod common;
use common::{camel, camel_exe, text, TempDir};
use std::path::Path;
use std::process::{Command, Stdio};

#[test]
fn bad_arguments_are_rejected_before_any_work() {
    // A data dir that does not exist: a message about it would mean the data was read first.
    let cases: &[(&[&str], &str)] = &[
        (
            &["--lr", "-1"],
            "--lr must be finite and greater than 0, got -1",
        ),
        (
            &["--lr=-1"],
            "--lr must be finite and greater than 0, got -1",
        ),
        (
            &["--lr", "nan"],
            "--lr must be finite and greater than 0, got NaN",
        ),
        (
            &["--lr", "inf"],
            "--lr must be finite and greater than 0, got inf",
        ),
        (&["--lr", "0"], "--lr must be finite and greater than 0"),
        (
            &["--batch-size", "0"],
            "--batch-size must be at least 1, got 0",
        ),
        (
            &["--batch-size", "-1"],
            "--batch-size must be at least 1, got -1",
        ),
        (&["--epochs", "0"], "--epochs must be at least 1"),
        (&["--subset", "0"], "--subset must be at least 1, got 0"),
        (&["--subset", "-5"], "--subset must be at least 1, got -5"),
        (
            &["--hidden", "256,0"],
            "--hidden (each width) must be at least 1, got 0",
        ),
        (&["--betas", "1,0.999"], "β₁ must be in [0, 1), got 1"),
        (&["--betas", "0.9,-0.1"], "β₂ must be in [0, 1), got -0.1"),
        (&["--betas", "0.9"], "--betas takes two numbers"),
        (
            &["--weight-decay", "-1"],
            "--weight-decay must be finite and at least 0",
        ),
        (
            &["--data", "cifar"],
            "--data must be one of mnist, fashion-mnist",
        ),
        (
            &["--precision", "f64"],
            "invalid value 'f64' for '--precision",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["train", "mlp", "--data-dir", "/nonexistent/camel-data"];
        args.extend_from_slice(extra);
        let out = camel(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.contains(want),
            "{extra:?}: expected {want:?} in {err:?}"
        );
        assert!(
            !err.contains("nonexistent"),
            "{extra:?} read data first: {err}"
        );
        assert!(out.stdout.is_empty(), "{extra:?}");
    }
}

#[test]
fn unavailable_device_is_rejected_before_any_work() {
    if camel_nn::cuda_available() {
        println!("skipped: a GPU answers here");
        return;
    }
    let out = camel(&[
        "train",
        "mlp",
        "--device",
        "cuda",
        "--data-dir",
        "/nonexistent/camel-data",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--device cuda:0") && err.contains("not available"),
        "{err}"
    );
}

#[test]
fn json_errors_are_json() {
    let out = camel(&["--json", "train", "mlp", "--lr", "-1"]);
    let err = text(&out.stderr);
    let v: serde_json::Value = serde_json::from_str(err.trim()).expect("one JSON line");
    assert_eq!(v["event"], "error");
    assert!(v["message"].as_str().unwrap().contains("--lr"), "{err}");

    // errors found by the argument parser itself are JSON too, with the usage exit code
    for args in [
        &["--json", "train", "mlp", "--epochs", "many"][..],
        &["--json", "trian"][..],
        &["data", "fetch", "--json"][..],
    ] {
        let out = camel(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        let v: serde_json::Value = serde_json::from_str(err.trim()).expect("one JSON line");
        assert_eq!(
            (v["event"].as_str(), v["kind"].as_str()),
            (Some("error"), Some("usage"))
        );
        assert!(!v["message"].as_str().unwrap().is_empty(), "{err}");
    }
    // without --json they stay clap's text
    let out = camel(&["train", "mlp", "--epochs", "many"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("error:"));
}

/// Trains a small MLP into a fresh run folder and checks every file there.
#[test]
fn training_leaves_a_run_folder_that_reloads() {
    let tmp = TempDir::new("run");
    let run = tmp.0.join("run");
    let run_s = run.to_str().unwrap();
    let out = camel(&[
        "--json", "train", "mlp", "--epochs", "2", "--subset", "1000", "--hidden", "32", "--out",
        run_s,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("stdout is JSON lines"))
        .collect();
    assert_eq!(lines.first().unwrap()["event"], "start");
    assert_eq!(lines.iter().filter(|v| v["event"] == "epoch").count(), 2);
    assert_eq!(lines.last().unwrap()["event"], "done");

    for f in [
        "command.txt",
        "config.json",
        "metrics.jsonl",
        "model.safetensors",
        "plot.png",
    ] {
        assert!(run.join(f).is_file(), "{f} missing");
    }
    let metrics = camel_models::run::read_metrics(&run).unwrap();
    assert_eq!(metrics.len(), 2);
    assert_eq!(metrics[1].epoch, 2);
    let best = metrics
        .iter()
        .filter_map(|m| m.test_acc)
        .fold(f32::NEG_INFINITY, f32::max);
    let png = std::fs::read(run.join("plot.png")).unwrap();
    assert_valid_png(&png);
    let cmd = std::fs::read_to_string(run.join("command.txt")).unwrap();
    assert!(cmd.contains("--subset 1000"), "{cmd}");

    // the checkpoint reloads to the best test accuracy
    let out = camel(&["--json", "eval", "--checkpoint", run_s]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    let acc = v["test_acc"].as_f64().unwrap() as f32;
    assert!((acc - best).abs() < 1e-6, "eval {acc} vs best {best}");

    // the same folder is not reused
    let again = camel(&["train", "mlp", "--epochs", "1", "--out", run_s]);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("already holds a run"));
}

/// The PNG signature, an IHDR chunk whose CRC matches, and an IEND chunk at the end.
fn assert_valid_png(png: &[u8]) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    let mut at = 8;
    let mut kinds = Vec::new();
    while at + 12 <= png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let kind = &png[at + 4..at + 8];
        assert!(at + 12 + len <= png.len(), "chunk runs past the end");
        let crc = u32::from_be_bytes(png[at + 8 + len..at + 12 + len].try_into().unwrap());
        assert_eq!(crc, crc32(&png[at + 4..at + 8 + len]), "CRC of {kind:?}");
        kinds.push(kind.to_vec());
        at += 12 + len;
    }
    assert_eq!(at, png.len(), "trailing bytes");
    assert_eq!(kinds.first().unwrap(), b"IHDR");
    assert_eq!(kinds.last().unwrap(), b"IEND");
    assert!(kinds.iter().any(|k| k == b"IDAT"));
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

#[test]
fn closed_stdout_ends_quietly() {
    let tmp = TempDir::new("pipe");
    let mut child = Command::new(camel_exe())
        .args([
            "train", "mlp", "--epochs", "30", "--subset", "64", "--hidden", "16", "--out",
        ])
        .arg(tmp.0.join("run"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // read one line, then close the pipe, as `| head -1` does
    let mut stdout = child.stdout.take().unwrap();
    let mut first = Vec::new();
    let mut byte = [0u8; 1];
    while std::io::Read::read(&mut stdout, &mut byte).unwrap() == 1 && byte[0] != b'\n' {
        first.push(byte[0]);
    }
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(text(&first).starts_with("camel: MLP"), "{}", text(&first));
    assert!(out.status.success(), "status {:?}: {err}", out.status);
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn quiet_prints_results_only() {
    let tmp = TempDir::new("quiet");
    let run = tmp.0.join("run");
    let out = camel(&[
        "train",
        "mlp",
        "--quiet",
        "--epochs",
        "1",
        "--subset",
        "200",
        "--hidden",
        "16",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    assert!(lines[0].starts_with("epoch 1/1:") && lines[0].contains("test acc"));
    assert!(Path::new(&run).join("metrics.jsonl").is_file());
}

fn sales_example() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../datasets/sales-example.tsv"
    )
    .to_string()
}

#[test]
fn regression_prints_rmse_r2_and_leaves_a_run_folder() {
    let tmp = TempDir::new("regression");
    let run = tmp.0.join("run");
    let out = camel(&[
        "--json",
        "train",
        "regression",
        "--data",
        &sales_example(),
        "--target",
        "sales",
        "--features",
        "tv,radio,price",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let done: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(done["event"], "done");
    assert!(done["r2"].as_f64().unwrap() > 0.97, "{done}");
    assert!(done["rmse"].as_f64().unwrap() < 0.75, "{done}");
    assert_eq!(
        done["features"],
        serde_json::json!(["tv", "radio", "price"])
    );
    assert_eq!(done["coefficients"].as_array().unwrap().len(), 3);
    for f in [
        "command.txt",
        "config.json",
        "metrics.jsonl",
        "model.safetensors",
        "plot.png",
        "standardize.json",
    ] {
        assert!(run.join(f).is_file(), "{f} missing");
    }
    let scaling: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("standardize.json")).unwrap())
            .unwrap();
    assert_eq!(scaling["target"]["names"], serde_json::json!(["sales"]));
    assert_eq!(camel_models::run::read_metrics(&run).unwrap().len(), 150);
}

#[test]
fn regression_input_errors_name_row_and_column() {
    let tmp = TempDir::new("regression-bad");
    let bad = tmp.0.join("bad.tsv");
    std::fs::write(&bad, "x\ty\n1\t2\n2\tn/a\n").unwrap();
    let run = tmp.0.join("run");
    let args = |data: &str, target: &str| {
        camel(&[
            "train",
            "regression",
            "--data",
            data,
            "--target",
            target,
            "--out",
            run.to_str().unwrap(),
        ])
    };
    let out = args(bad.to_str().unwrap(), "y");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("line 3, column \"y\": not a number: \"n/a\""),
        "{err}"
    );
    let out = args(&sales_example(), "revenue");
    let err = text(&out.stderr);
    assert!(err.contains("no column \"revenue\""), "{err}");
    assert!(err.contains("\"tv\", \"radio\""), "{err}");
    assert!(!run.exists(), "a failed run leaves no folder");
    let out = camel(&[
        "train",
        "regression",
        "--data",
        &sales_example(),
        "--target",
        "sales",
        "--test-fraction",
        "1.5",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--test-fraction must be in (0, 1), got 1.5"));
}

/// `camel plot` redraws a run folder's curves over the axis asked for; a folder without
/// metrics is an error naming the file.
#[test]
fn plot_redraws_a_run_folder() {
    let dir = std::env::temp_dir().join(format!("camel-plot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let out = camel(&["plot", d]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("metrics.jsonl"));
    let lines: String = (0..4)
        .map(|i| {
            format!(
                "{{\"step\":{},\"epoch\":0,\"train_loss\":{},\"test_loss\":{},\"seconds\":1.0}}\n",
                250 * i,
                4.0 - i as f32,
                4.1 - i as f32
            )
        })
        .collect();
    std::fs::write(dir.join("metrics.jsonl"), lines).unwrap();
    let png = dir.join("steps.png");
    let out = camel(&[
        "--json",
        "plot",
        d,
        "--x",
        "step",
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(v["records"], 4);
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    let _ = std::fs::remove_dir_all(&dir);
}
