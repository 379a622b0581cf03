//! LeNet-5 and SimpleCnn: shapes, parameter and buffer names, train vs eval, the state-dict round
//! trip, bad input; LeNet-5 learning an MNIST subset on the CPU, and in bf16 and f16 (autocast);
//! `camel train lenet|cnn` leaving a run folder that `camel eval` reloads, in f32 and in bf16.

mod common;
use camel_models::data::{data_dir, DataLoader, Mnist};
use camel_models::train::{evaluate, train_epoch};
use camel_models::{LeNet5, SimpleCnn, SimpleCnnConfig};
use camel_nn::testing::devices;
use camel_nn::{Device, Error, Module, Tensor};
use camel_optim::Adam;
use common::camel_exe;
use std::process::{Command, Stdio};

fn images(n: usize, seed: u64, d: Device) -> Tensor {
    Tensor::randn_seeded(&[n, 1, 28, 28], seed, d).unwrap()
}

#[test]
fn lenet5_shapes_and_names() {
    for d in devices() {
        let m = LeNet5::new(10, 0, d).unwrap();
        let x = images(3, 1, d);
        let y = m.forward(&x).unwrap();
        assert_eq!(y.shape(), &[3, 10], "{d}");
        // flattened rows are viewed as the same images
        let flat = m.forward(&x.reshape(&[3, 784]).unwrap()).unwrap();
        assert_eq!(flat.to_vec().unwrap(), y.to_vec().unwrap(), "{d}");
        let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
        let want: Vec<String> = ["conv1", "conv2", "fc1", "fc2", "fc3"]
            .iter()
            .flat_map(|l| [format!("{l}.weight"), format!("{l}.bias")])
            .collect();
        assert_eq!(names, want);
        // 156 + 2416 + 48120 + 10164 + 850, LeNet-5's count
        assert_eq!(m.num_parameters(), 61_706);
        let e = m
            .forward(&images(2, 1, d).reshape(&[2, 28, 28, 1]).unwrap())
            .unwrap_err();
        assert!(
            matches!(e, Error::BadShape { op: "LeNet5", .. }),
            "{d}: {e}"
        );
        let e = m
            .forward(&Tensor::zeros(&[2, 3, 28, 28], d).unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("[2, 3, 28, 28]"), "{d}: {e}");
    }
    // the same seed gives the same weights
    let a = LeNet5::new(10, 7, Device::Cpu).unwrap().state_dict();
    let b = LeNet5::new(10, 7, Device::Cpu).unwrap().state_dict();
    assert_eq!(
        a["fc1.weight"].to_vec().unwrap(),
        b["fc1.weight"].to_vec().unwrap()
    );
}

#[test]
fn simple_cnn_train_eval_and_state_dict() {
    for d in devices() {
        let cfg = SimpleCnnConfig {
            channels: vec![4, 8],
            hidden: 16,
            ..SimpleCnnConfig::default()
        };
        let m = SimpleCnn::new(&cfg, 0, d).unwrap();
        let x = images(4, 2, d);
        assert!(m.is_training());
        let train_out = m.forward(&x).unwrap();
        assert_eq!(train_out.shape(), &[4, 10]);
        let buffers: Vec<String> = m.named_buffers().into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            buffers,
            [
                "features.1.running_mean",
                "features.1.running_var",
                "features.1.num_batches_tracked",
                "features.5.running_mean",
                "features.5.running_var",
                "features.5.num_batches_tracked"
            ]
        );
        let state = m.state_dict();
        assert_eq!(
            state["features.1.num_batches_tracked"].to_vec().unwrap(),
            vec![1.0]
        );
        assert!(
            state.contains_key("classifier.2.weight") && !state.contains_key("features.0.bias")
        );
        m.eval();
        let eval_out = m.forward(&x).unwrap().to_vec().unwrap();
        assert_ne!(
            eval_out,
            train_out.to_vec().unwrap(),
            "{d}: eval uses running statistics"
        );
        // a fresh model with the state dict gives the same eval output
        let fresh = SimpleCnn::new(&cfg, 1, d).unwrap();
        fresh.load_state_dict(&state).unwrap();
        fresh.eval();
        assert_eq!(
            fresh.forward(&x).unwrap().to_vec().unwrap(),
            eval_out,
            "{d}"
        );
        // and trains: every parameter gets a gradient
        m.train();
        m.forward(&x).unwrap().sum().unwrap().backward().unwrap();
        for (n, p) in m.named_parameters() {
            assert!(p.grad().is_some(), "{d}: {n} has no gradient");
        }
    }
    let bad = SimpleCnnConfig {
        channels: vec![4, 4, 4, 4, 4, 4],
        ..SimpleCnnConfig::default()
    };
    assert!(SimpleCnn::new(&bad, 0, Device::Cpu).is_err());
}

/// CI's LeNet check: a short CPU run on a subset of MNIST reaches a meaningful accuracy on the
/// first 2000 test images.
#[test]
fn lenet5_learns_mnist_subset() {
    let dir = data_dir();
    let mut ds = match Mnist::load(&dir, "mnist") {
        Ok(ds) => ds,
        Err(e) => {
            if camel_nn::core::config::require_data() {
                panic!("MNIST required (CAMEL_REQUIRE_DATA=1) but not loadable: {e}");
            }
            eprintln!("skipped: MNIST not found at {} ({e})", dir.display());
            return;
        }
    };
    ds.train = ds.train.subset(8000);
    ds.test = ds.test.subset(2000);
    let device = Device::Cpu;
    let model = LeNet5::new(10, 0, device).unwrap();
    let mut opt = Adam::new(model.parameters(), 2e-3).unwrap();
    let loader = DataLoader::new(ds.train.n, 64).unwrap().shuffle(Some(0));
    let (before_loss, before_acc) = evaluate(&model, &ds.test, 500, device).unwrap();
    for epoch in 0..2 {
        train_epoch(
            &model,
            &mut opt,
            &ds.train,
            &loader,
            epoch,
            device,
            100,
            |_, _, _| {},
        )
        .unwrap();
    }
    let (loss, acc) = evaluate(&model, &ds.test, 500, device).unwrap();
    eprintln!("LeNet-5 on 8000 MNIST images: test loss {before_loss:.3} -> {loss:.3}, accuracy {before_acc:.3} -> {acc:.4}");
    assert!(
        acc >= 0.93,
        "test accuracy {acc} after 2 epochs on 8000 images (expected ≥ 0.93)"
    );
    assert!(
        loss < before_loss / 5.0,
        "test loss fell only from {before_loss} to {loss}"
    );
}

/// `camel train lenet` and `camel train cnn` write a run folder that `camel eval` reloads to the
/// best test accuracy.
#[test]
fn cli_trains_and_evaluates_lenet_and_cnn() {
    if Mnist::load(&data_dir(), "mnist").is_err() && !camel_nn::core::config::require_data() {
        eprintln!("skipped: MNIST not found");
        return;
    }
    let tmp = std::env::temp_dir().join(format!("camel-cnn-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    for (model, precision) in [("lenet", "f32"), ("cnn", "f32"), ("lenet", "bf16")] {
        let run = tmp.join(format!("{model}-{precision}"));
        let run_s = run.to_str().unwrap();
        let camel = |args: &[&str]| {
            Command::new(camel_exe())
                .args(args)
                .stdin(Stdio::null())
                .output()
                .expect("run camel")
        };
        let out = camel(&[
            "--json",
            "train",
            model,
            "--epochs",
            "1",
            "--subset",
            "256",
            "--precision",
            precision,
            "--out",
            run_s,
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{model}: {stderr}");
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON lines"))
            .collect();
        assert_eq!(lines[0]["event"], "start");
        assert_eq!(lines[0]["model"], model);
        let best = lines.last().unwrap()["best_test_acc"].as_f64().unwrap();
        assert!(best > 0.2, "{model}: {best}");
        let config = std::fs::read_to_string(run.join("config.json")).unwrap();
        assert!(
            config.contains(&format!("\"model\": \"{model}\"")) && !config.contains("hidden"),
            "{config}"
        );
        assert!(
            config.contains(&format!("\"precision\": \"{precision}\"")),
            "{config}"
        );
        let out = camel(&["--json", "eval", "--checkpoint", run_s]);
        assert!(
            out.status.success(),
            "{model}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value =
            serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
        let acc = v["test_acc"].as_f64().unwrap();
        assert!(
            (acc - best).abs() < 1e-6,
            "{model}: eval {acc} vs best {best}"
        );
        // --hidden belongs to the MLP only
        let out = camel(&["train", model, "--hidden", "8", "--out", run_s]);
        assert_eq!(out.status.code(), Some(2), "{model}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Mixed precision for the convolutional models: LeNet-5 trained with its convolutions and
/// matrix products in bf16, or in f16 with dynamic loss scaling (f32 master weights), reaches the
/// f32 run's accuracy within noise on every device; SimpleCnn's batch norm keeps f32 running
/// statistics under autocast. Logits are 16-bit; every parameter and buffer stays f32.
#[test]
fn convolutional_models_in_16_bit_match_f32_on_a_subset() {
    use camel_models::train::{train_epoch_augmented, Precision};
    use camel_nn::DType;
    let dir = data_dir();
    let Ok(mut ds) = Mnist::load(&dir, "mnist") else {
        assert!(!camel_nn::core::config::require_data(), "MNIST required");
        return;
    };
    ds.train = ds.train.subset(8_000);
    ds.test = ds.test.subset(2_000);
    for device in devices() {
        let precisions = [Precision::F32, Precision::Bf16, Precision::F16];
        let mut acc = Vec::new();
        for precision in precisions {
            let what = format!("{device} {}", precision.name());
            let _scope = camel_nn::autocast_guard(precision.autocast()).unwrap();
            let mut scaler = precision.loss_scaler(device).unwrap();
            let model = LeNet5::new(10, 0, device).unwrap();
            let mut opt = Adam::new(model.parameters(), 2e-3).unwrap();
            let loader = DataLoader::new(ds.train.n, 64).unwrap().shuffle(Some(0));
            train_epoch_augmented(
                &model,
                &mut opt,
                scaler.as_mut(),
                &ds.train,
                &loader,
                0,
                device,
                100,
                None,
                |_, _, _| {},
            )
            .unwrap();
            if let Some(s) = &scaler {
                // the default scale (2^16) may overflow the first steps' gradients in f16; the
                // scaler skips those and halves the scale, and the rest train
                let skipped = s.skipped_steps().unwrap();
                assert!(skipped <= 4, "{what}: {skipped} of 125 steps skipped");
            }
            let want = precision.autocast().unwrap_or(DType::F32);
            assert_eq!(
                model.forward(&images(2, 1, device)).unwrap().dtype(),
                want,
                "{what}"
            );
            for (name, p) in model.named_parameters() {
                assert_eq!(p.tensor().dtype(), DType::F32, "{what} {name}");
            }
            acc.push(evaluate(&model, &ds.test, 500, device).unwrap().1);

            // SimpleCnn: a few steps, its batch-norm statistics f32, finite and moved
            let cnn = SimpleCnn::new(&SimpleCnnConfig::default(), 0, device).unwrap();
            let mut opt = Adam::new(cnn.parameters(), 1e-3).unwrap();
            let few = DataLoader::new(256, 64).unwrap();
            let (loss, _, _) = train_epoch_augmented(
                &cnn,
                &mut opt,
                scaler.as_mut(),
                &ds.train,
                &few,
                0,
                device,
                100,
                None,
                |_, _, _| {},
            )
            .unwrap();
            assert!(
                loss.is_finite() && loss < 2.3,
                "{what}: SimpleCnn loss {loss}"
            );
            let stats: Vec<_> = cnn
                .named_buffers()
                .into_iter()
                .filter(|(name, _)| name.ends_with("running_mean") || name.ends_with("running_var"))
                .collect();
            assert!(
                !stats.is_empty(),
                "{what}: SimpleCnn has batch-norm statistics"
            );
            for (name, b) in stats {
                let t = b.tensor();
                assert_eq!(t.dtype(), DType::F32, "{what} {name}");
                let v = t.to_vec().unwrap();
                assert!(v.iter().all(|x| x.is_finite()), "{what} {name}");
                let initial = if name.ends_with("running_mean") {
                    0.0
                } else {
                    1.0
                };
                assert!(
                    v.iter().any(|&x| x != initial),
                    "{what} {name} never updated"
                );
            }
        }
        eprintln!(
            "{device}: LeNet-5 accuracy f32 {:.4}, bf16 {:.4}, f16 {:.4}",
            acc[0], acc[1], acc[2]
        );
        assert!(acc[0] >= 0.85, "{device} f32 accuracy {}", acc[0]);
        for (p, a) in precisions.iter().zip(&acc).skip(1) {
            assert!(
                (acc[0] - a).abs() <= 0.02,
                "{device}: {} accuracy {a} against f32's {}",
                p.name(),
                acc[0]
            );
        }
    }
}
