//! CIFAR-10 through the `camel` program: a generated set in the binary format trains a CNN
//! (with `--augment`) and an MLP, `camel eval` reproduces the accuracy, LeNet-5 is refused, and a
//! missing folder or a truncated batch file stops the run naming the path. Augmentation of the
//! training batches: applied by the training loop only, and repeatable for a seed.

mod common;
use camel_models::data::{Augment, ImageSet, Split, CIFAR10_RECORD_BYTES};
use camel_models::train::{
    batch, epoch_augment, evaluate, train_batch, train_epoch, train_epoch_augmented,
};
use camel_models::Mlp;
use camel_nn::{Device, Module};
use camel_optim::Adam;
use common::{camel_cmd, text, TempDir};
use std::path::{Path, PathBuf};
use std::process::Output;

/// The `camel` program with `args`, without `CAMEL_DATA_DIR`: the tests name their data.
fn camel(args: &[&str]) -> Output {
    camel_cmd(args)
        .env_remove("CAMEL_DATA_DIR")
        .output()
        .expect("run camel")
}

/// Classes of the generated set: the label is the image's bright colour channel.
const CLASSES: usize = 3;

/// `n` records of the binary format, the `k`-th of class `(first + k) % CLASSES`: the channel of
/// its class holds bright pixels (160 … 255), the other two dark ones (0 … 95), all drawn from a
/// generator seeded with `seed`.
fn records(n: usize, first: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut next = move || {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (s >> 33) as u8
    };
    let mut v = Vec::with_capacity(n * CIFAR10_RECORD_BYTES);
    for k in 0..n {
        let label = (first + k) % CLASSES;
        v.push(label as u8);
        for c in 0..3 {
            for _ in 0..1024 {
                let r = next() % 96;
                v.push(if c == label { 160 + r } else { r });
            }
        }
    }
    v
}

/// `root/cifar-10/cifar-10-batches-bin/` as `camel data fetch cifar-10` leaves it: five training
/// batches of `per_batch` images and a test batch of `test` images.
fn write_cifar(root: &Path, per_batch: usize, test: usize) -> PathBuf {
    let dir = root.join("cifar-10").join("cifar-10-batches-bin");
    std::fs::create_dir_all(&dir).unwrap();
    for b in 1..=5 {
        let recs = records(per_batch, b, b as u64);
        std::fs::write(dir.join(format!("data_batch_{b}.bin")), recs).unwrap();
    }
    std::fs::write(dir.join("test_batch.bin"), records(test, 0, 99)).unwrap();
    dir
}

fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect()
}

#[test]
fn cnn_learns_generated_cifar10_with_augmentation_and_eval_reproduces_it() {
    let tmp = TempDir::new("cnn");
    write_cifar(&tmp.0, 12, 30);
    let data_dir = tmp.0.to_str().unwrap();
    let run = tmp.0.join("run");
    let run_s = run.to_str().unwrap();
    let t0 = std::time::Instant::now();
    let out = camel(&[
        "--json",
        "train",
        "cnn",
        "--data",
        "cifar-10",
        "--data-dir",
        data_dir,
        "--epochs",
        "4",
        "--batch-size",
        "10",
        "--lr",
        "3e-3",
        "--augment",
        "--out",
        run_s,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    eprintln!("camel train cnn on 60 generated images: {:?}", t0.elapsed());
    let lines = json_lines(&out);
    assert_eq!(lines[0]["event"], "start");
    assert_eq!(lines[0]["model"], "cnn");
    assert_eq!(
        (lines[0]["train"].as_u64(), lines[0]["test"].as_u64()),
        (Some(60), Some(30))
    );
    let best = lines.last().unwrap()["best_test_acc"].as_f64().unwrap();
    let accs: Vec<_> = lines
        .iter()
        .filter_map(|l| l["test_acc"].as_f64())
        .collect();
    eprintln!("test accuracy by epoch: {accs:?}");
    // chance is 1/3: the three classes are balanced
    assert!(best >= 0.9, "best test accuracy {best}: {lines:?}");
    for f in [
        "config.json",
        "metrics.jsonl",
        "model.safetensors",
        "plot.png",
        "command.txt",
    ] {
        assert!(run.join(f).is_file(), "{f} missing from the run folder");
    }
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["data"], "cifar-10");
    assert_eq!(config["augment"], true);
    // eval reads the test set unaugmented, as training's evaluations did: the same accuracy
    let out = camel(&["--json", "eval", "--checkpoint", run_s]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = &json_lines(&out)[0];
    assert_eq!(v["data"], "cifar-10");
    assert_eq!(v["n"], 30);
    let acc = v["test_acc"].as_f64().unwrap();
    assert!((acc - best).abs() < 1e-6, "eval {acc} vs best {best}");
}

#[test]
fn mlp_trains_on_cifar10_through_its_alias() {
    let tmp = TempDir::new("mlp");
    write_cifar(&tmp.0, 4, 6);
    let run = tmp.0.join("run");
    let out = camel(&[
        "--json",
        "train",
        "mlp",
        "--data",
        "cifar10",
        "--data-dir",
        tmp.0.to_str().unwrap(),
        "--hidden",
        "16",
        "--epochs",
        "1",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = json_lines(&out);
    assert_eq!(lines[0]["sizes"], serde_json::json!([3072, 16, 10]));
    let config = std::fs::read_to_string(run.join("config.json")).unwrap();
    assert!(
        config.contains("\"data\": \"cifar-10\"") && config.contains("\"augment\": false"),
        "{config}"
    );
    let out = camel(&["eval", "--checkpoint", run.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn lenet_on_cifar10_is_a_usage_error() {
    let tmp = TempDir::new("lenet");
    let run = tmp.0.join("run");
    for json in [false, true] {
        let mut args = vec!["train", "lenet", "--data", "cifar10", "--data-dir"];
        args.extend([tmp.0.to_str().unwrap(), "--out", run.to_str().unwrap()]);
        if json {
            args.insert(0, "--json");
        }
        let out = camel(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("LeNet-5 takes 28×28 single-channel images") && err.contains("3×32×32"),
            "{err}"
        );
        assert!(!run.exists());
    }
    // an unknown set names the ones there are
    let out = camel(&["train", "cnn", "--data", "cifar-100"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cifar-10") && err.contains("cifar-100"),
        "{err}"
    );
}

#[test]
fn a_missing_folder_or_a_truncated_batch_stops_the_run_naming_the_path() {
    let tmp = TempDir::new("errors");
    let run = tmp.0.join("run");
    let train = |data_dir: &Path| {
        camel(&[
            "train",
            "cnn",
            "--data",
            "cifar-10",
            "--data-dir",
            data_dir.to_str().unwrap(),
            "--epochs",
            "1",
            "--out",
            run.to_str().unwrap(),
        ])
    };
    let out = train(&tmp.0);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let looked = tmp.0.join("cifar-10").join("cifar-10-batches-bin");
    assert!(
        err.contains(looked.to_str().unwrap()) && err.contains("camel data fetch cifar-10"),
        "{err}"
    );
    assert!(!run.exists(), "a run folder was left behind");

    let dir = write_cifar(&tmp.0, 4, 4);
    let bad = dir.join("data_batch_3.bin");
    let bytes = std::fs::read(&bad).unwrap();
    std::fs::write(&bad, &bytes[..2 * CIFAR10_RECORD_BYTES + 100]).unwrap();
    let out = train(&tmp.0);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(bad.to_str().unwrap()) && err.contains("record 2"),
        "{err}"
    );
    assert!(!run.exists(), "a run folder was left behind");

    // a missing test batch is named too
    std::fs::write(&bad, &bytes).unwrap();
    std::fs::remove_file(dir.join("test_batch.bin")).unwrap();
    let out = train(&tmp.0);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(dir.join("test_batch.bin").to_str().unwrap()),
        "{err}"
    );
    assert!(!run.exists(), "a run folder was left behind");
}

/// A split of `n` small colour images (3 × 8 × 8) of two classes.
fn colour_split(n: usize) -> Split {
    Split {
        images: (0..n * 192).map(|i| ((i * 37) % 11) as f32 - 5.0).collect(),
        labels: (0..n).map(|i| (i % 2) as u8).collect(),
        n,
        channels: 3,
        rows: 8,
        cols: 8,
    }
}

#[test]
fn augmentation_changes_training_batches_only_and_repeats_for_a_seed() {
    let d = Device::Cpu;
    let s = colour_split(16);
    let idx = [3, 0, 7, 12];
    let plain = batch(&s, &idx, d).unwrap().0;
    assert_eq!(plain.shape(), &[4, 192]);
    assert_eq!(
        train_batch(&s, &idx, d, None).unwrap().0.to_vec().unwrap(),
        plain.to_vec().unwrap()
    );
    let aug = |seed, epoch| {
        let (x, y) = train_batch(&s, &idx, d, Some(&mut epoch_augment(seed, epoch))).unwrap();
        assert_eq!(y.to_vec_i64().unwrap(), vec![1, 0, 1, 0]);
        assert_eq!(x.shape(), &[4, 192]);
        x.to_vec().unwrap()
    };
    assert_eq!(aug(5, 1), aug(5, 1), "the same seed and epoch");
    assert_ne!(aug(5, 1), plain.to_vec().unwrap());
    assert_ne!(aug(5, 1), aug(5, 2), "another epoch");
    assert_ne!(aug(5, 1), aug(6, 1), "another seed");
    // the batch is the images' own crops: Augment on the gathered images gives the same values
    let (gathered, _) = s.gather(&idx);
    let direct = Augment::cifar(0).apply(&gathered, [4, 3, 8, 8]).unwrap();
    let via = train_batch(&s, &idx, d, Some(&mut Augment::cifar(0)))
        .unwrap()
        .0;
    assert_eq!(via.to_vec().unwrap(), direct);

    // an epoch trained with augmentation: repeatable, and not the plain epoch
    let test = colour_split(6);
    // `augmented`: through train_epoch_augmented, with an augmentation seeded by `seed` if any
    let run = |augmented: bool, seed: Option<u64>| {
        let model = Mlp::new(&[192, 8, 2], 0, d).unwrap();
        let mut opt = Adam::new(model.parameters(), 1e-2).unwrap();
        let loader = camel_models::data::DataLoader::new(s.n, 4)
            .unwrap()
            .shuffle(Some(1));
        let mut a = seed.map(|seed| epoch_augment(seed, 1));
        let (loss, steps, _) = if augmented {
            train_epoch_augmented(
                &model,
                &mut opt,
                None,
                &s,
                &loader,
                1,
                d,
                1,
                a.as_mut(),
                |_, _, _| {},
            )
        } else {
            train_epoch(&model, &mut opt, &s, &loader, 1, d, 1, |_, _, _| {})
        }
        .unwrap();
        assert_eq!(steps, 4);
        let weights = model.state_dict()["0.weight"].to_vec().unwrap();
        // evaluation reads the test images as they are, whatever the training did
        let (eval_loss, _) = evaluate(&model, &test, 6, d).unwrap();
        let (x, y) = batch(&test, &(0..6).collect::<Vec<_>>(), d).unwrap();
        let by_hand = camel_nn::no_grad(|| model.forward(&x)?.cross_entropy(&y)?.item()).unwrap();
        assert!(
            (eval_loss - by_hand).abs() < 1e-5,
            "{eval_loss} vs {by_hand}"
        );
        (loss, weights)
    };
    let plain = run(false, None);
    let a = run(true, Some(3));
    assert_eq!(
        a,
        run(true, Some(3)),
        "the same seed trains the same weights"
    );
    assert_ne!(a.1, plain.1, "augmentation changed what was trained on");
    assert_ne!(a.1, run(true, Some(4)).1, "another seed, other crops");
    // without an augmentation, train_epoch_augmented is train_epoch
    assert_eq!(run(true, None), plain);
}

#[test]
fn image_sets_load_cifar10_as_colour_splits() {
    let tmp = TempDir::new("load");
    write_cifar(&tmp.0, 2, 3);
    let ds = ImageSet::load(&tmp.0, "cifar10").unwrap();
    assert_eq!(ds.name, "cifar-10");
    assert_eq!((ds.train.n, ds.test.n), (10, 3));
    assert_eq!(ds.train.image_shape(), [3, 32, 32]);
    assert_eq!(ds.train.image_len(), 3072);
    assert_eq!(ds.test.labels, vec![0, 1, 2]);
    assert_eq!(ds.train.subset(4).image_shape(), [3, 32, 32]);
}
