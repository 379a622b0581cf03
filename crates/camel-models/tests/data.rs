//! Tests for `camel_models::data`: IDX error handling, DataLoader semantics and
//! (when present) the real MNIST / Fashion-MNIST files.

mod common;
use common::TempDir;
use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use camel_models::data::{
    data_dir, find_datasets_upwards, read_idx_images, read_idx_labels, DataError, DataLoader,
    LoaderError, Mnist,
};
use flate2::write::GzEncoder;
use flate2::Compression;

// ---------------------------------------------------------------- helpers

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// IDX image file: header claiming `n` images of `rows`x`cols`, then `pixels`.
fn idx_images(n: u32, rows: u32, cols: u32, pixels: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    for w in [0x0803, n, rows, cols] {
        v.extend_from_slice(&w.to_be_bytes());
    }
    v.extend_from_slice(pixels);
    v
}

/// IDX label file: header claiming `n` labels, then `labels`.
fn idx_labels(n: u32, labels: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    for w in [0x0801, n] {
        v.extend_from_slice(&w.to_be_bytes());
    }
    v.extend_from_slice(labels);
    v
}

fn assert_names(err: &DataError, path: &Path) {
    let msg = err.to_string();
    assert!(
        msg.contains(&path.display().to_string()),
        "error does not name {}: {msg}",
        path.display()
    );
}

// ---------------------------------------------------------------- IDX reader

#[test]
fn reads_valid_idx_plain_and_gzip() {
    let tmp = TempDir::new("valid");
    let pixels: Vec<u8> = (0..2 * 3 * 4).map(|i| i as u8).collect();
    let raw = idx_images(2, 3, 4, &pixels);
    for path in [tmp.write("img", &raw), tmp.write("img.gz", &gzip(&raw))] {
        let (data, n, rows, cols) = read_idx_images(&path).unwrap();
        assert_eq!((n, rows, cols), (2, 3, 4));
        assert_eq!(data, pixels);
    }
    let labels = [3u8, 1, 4, 1, 5];
    let raw = idx_labels(5, &labels);
    for path in [tmp.write("lab", &raw), tmp.write("lab.gz", &gzip(&raw))] {
        assert_eq!(read_idx_labels(&path).unwrap(), labels);
    }
}

#[test]
fn truncated_payload_is_truncated_error() {
    let tmp = TempDir::new("trunc");
    // Header claims 10 images of 2x2 (40 bytes), only 7 bytes follow.
    let raw = idx_images(10, 2, 2, &[0; 7]);
    for path in [tmp.write("img", &raw), tmp.write("img.gz", &gzip(&raw))] {
        let err = read_idx_images(&path).unwrap_err();
        match &err {
            DataError::Truncated {
                path: p,
                expected_bytes,
                found_bytes,
            } => {
                assert_eq!(p, &path);
                assert_eq!((*expected_bytes, *found_bytes), (16 + 40, 16 + 7));
            }
            other => panic!("expected Truncated, got {other:?}"),
        }
        assert_names(&err, &path);
    }
    // Labels: header claims 100, 3 present.
    let raw = idx_labels(100, &[1, 2, 3]);
    for path in [tmp.write("lab", &raw), tmp.write("lab.gz", &gzip(&raw))] {
        let err = read_idx_labels(&path).unwrap_err();
        assert!(matches!(err, DataError::Truncated { .. }), "{err:?}");
        assert_names(&err, &path);
    }
}

#[test]
fn truncated_header_is_truncated_error() {
    let tmp = TempDir::new("trunc-header");
    let raw = &idx_images(1, 1, 1, &[0])[..10];
    for path in [tmp.write("img", raw), tmp.write("img.gz", &gzip(raw))] {
        let err = read_idx_images(&path).unwrap_err();
        assert!(
            matches!(
                err,
                DataError::Truncated {
                    expected_bytes: 16,
                    found_bytes: 10,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_names(&err, &path);
    }
    // Empty files.
    for path in [tmp.write("empty", &[]), tmp.write("empty.gz", &gzip(&[]))] {
        let err = read_idx_labels(&path).unwrap_err();
        assert!(
            matches!(err, DataError::Truncated { found_bytes: 0, .. }),
            "{err:?}"
        );
    }
}

#[test]
fn bad_magic_is_bad_magic_error() {
    let tmp = TempDir::new("magic");
    // A label file read as images, and vice versa.
    let labels = idx_labels(4, &[0, 1, 2, 3]);
    for path in [
        tmp.write("lab", &labels),
        tmp.write("lab.gz", &gzip(&labels)),
    ] {
        let err = read_idx_images(&path).unwrap_err();
        assert!(
            matches!(
                err,
                DataError::BadMagic {
                    expected: 0x803,
                    found: 0x801,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_names(&err, &path);
    }
    let images = idx_images(1, 2, 2, &[0; 4]);
    let path = tmp.write("img", &images);
    let err = read_idx_labels(&path).unwrap_err();
    assert!(
        matches!(
            err,
            DataError::BadMagic {
                expected: 0x801,
                found: 0x803,
                ..
            }
        ),
        "{err:?}"
    );
    // Text file.
    let path = tmp.write("text", b"hello, world, this is not IDX");
    let err = read_idx_labels(&path).unwrap_err();
    assert!(matches!(err, DataError::BadMagic { .. }), "{err:?}");
    assert_names(&err, &path);
}

#[test]
fn truncated_gzip_stream_is_error_naming_file() {
    let tmp = TempDir::new("gz-trunc");
    // Incompressible-ish payload so the compressed stream is long.
    let mut state = 12345u32;
    let pixels: Vec<u8> = (0..50 * 28 * 28)
        .map(|_| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (state >> 24) as u8
        })
        .collect();
    let gz = gzip(&idx_images(50, 28, 28, &pixels));
    // Cut in the middle of the deflate data.
    let path = tmp.write("mid.gz", &gz[..gz.len() / 2]);
    let err = read_idx_images(&path).unwrap_err();
    assert!(matches!(err, DataError::Truncated { .. }), "{err:?}");
    assert_names(&err, &path);
    // Cut off only the 8-byte trailer (CRC32 + size): all data decompresses.
    let path = tmp.write("trailer.gz", &gz[..gz.len() - 4]);
    let err = read_idx_images(&path).unwrap_err();
    assert!(matches!(err, DataError::Corrupt { .. }), "{err:?}");
    assert_names(&err, &path);
    // Cut inside the gzip header.
    let path = tmp.write("header.gz", &gz[..5]);
    let err = read_idx_images(&path).unwrap_err();
    assert!(matches!(err, DataError::Truncated { .. }), "{err:?}");
    assert_names(&err, &path);
    // Flipped byte in the middle: corrupt data or checksum, never a panic.
    let mut bad = gz.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0xff;
    let path = tmp.write("flip.gz", &bad);
    let err = read_idx_images(&path).unwrap_err();
    assert_names(&err, &path);
}

#[test]
fn trailing_bytes_and_huge_header_are_errors() {
    let tmp = TempDir::new("trailing");
    let raw = idx_labels(2, &[1, 2, 3, 4]);
    let path = tmp.write("lab", &raw);
    let err = read_idx_labels(&path).unwrap_err();
    assert!(matches!(err, DataError::Mismatch { .. }), "{err:?}");
    assert_names(&err, &path);
    // Header claims 2^32-1 images of 65535x65535: must fail cleanly, not allocate.
    let raw = idx_images(u32::MAX, u32::MAX, u32::MAX, &[0; 16]);
    let path = tmp.write("huge", &raw);
    let err = read_idx_images(&path).unwrap_err();
    assert!(
        matches!(
            err,
            DataError::Mismatch { .. } | DataError::Truncated { .. }
        ),
        "{err:?}"
    );
    assert_names(&err, &path);
}

#[test]
fn missing_file_is_missing_error() {
    let tmp = TempDir::new("missing");
    let path = tmp.0.join("nope-idx3-ubyte.gz");
    let err = read_idx_images(&path).unwrap_err();
    match &err {
        DataError::Missing { path: p, hint } => {
            assert_eq!(p, &path);
            assert!(hint.contains("CAMEL_DATA_DIR"), "{hint}");
        }
        other => panic!("expected Missing, got {other:?}"),
    }
    assert_names(&err, &path);
    // Whole data set absent.
    let err = Mnist::load(&tmp.0, "mnist").unwrap_err();
    assert!(matches!(err, DataError::Missing { .. }), "{err:?}");
    assert!(err.to_string().contains("datasets/README.md"), "{err}");
    // Unknown name.
    assert!(Mnist::load(&tmp.0, "cifar").is_err());
}

#[test]
fn mnist_load_checks_consistency() {
    let tmp = TempDir::new("consistency");
    let root = tmp.0.join("mnist");
    std::fs::create_dir_all(&root).unwrap();
    let write = |name: &str, bytes: &[u8]| std::fs::write(root.join(name), gzip(bytes)).unwrap();
    let px: Vec<u8> = (0..3 * 28 * 28).map(|i| (i % 256) as u8).collect();
    write("train-images-idx3-ubyte.gz", &idx_images(3, 28, 28, &px));
    write("train-labels-idx1-ubyte.gz", &idx_labels(3, &[0, 9, 4]));
    write(
        "t10k-images-idx3-ubyte.gz",
        &idx_images(1, 28, 28, &px[..784]),
    );
    write("t10k-labels-idx1-ubyte.gz", &idx_labels(1, &[7]));
    let m = Mnist::load(&tmp.0, "mnist").unwrap();
    assert_eq!((m.train.n, m.train.rows, m.train.cols), (3, 28, 28));
    assert_eq!(m.train.images.len(), 3 * 784);
    let expect = |p: u8| (p as f32 / 255.0 - 0.1307) / 0.3081;
    assert!((m.train.images[0] - expect(0)).abs() < 1e-6);
    assert!((m.train.images[255] - expect(255)).abs() < 1e-6);
    assert!((m.train.images[784] - expect((784 % 256) as u8)).abs() < 1e-6);

    // gather / subset
    let (x, y) = m.train.gather(&[2, 0]);
    assert_eq!(y, vec![4i64, 0]);
    assert_eq!(x.len(), 2 * 784);
    assert_eq!(&x[..784], &m.train.images[2 * 784..3 * 784]);
    assert_eq!(&x[784..], &m.train.images[..784]);
    let s = m.train.subset(2);
    assert_eq!(
        (s.n, s.images.len(), s.labels.as_slice()),
        (2, 2 * 784, &[0u8, 9][..])
    );
    assert_eq!(m.train.subset(100).n, 3);

    // Count mismatch names the labels file.
    write("t10k-labels-idx1-ubyte.gz", &idx_labels(2, &[7, 1]));
    let err = Mnist::load(&tmp.0, "mnist").unwrap_err();
    assert!(matches!(err, DataError::Mismatch { .. }), "{err:?}");
    assert!(
        err.to_string().contains("t10k-labels-idx1-ubyte.gz"),
        "{err}"
    );
    // Label out of range.
    write("t10k-labels-idx1-ubyte.gz", &idx_labels(1, &[10]));
    let err = Mnist::load(&tmp.0, "mnist").unwrap_err();
    assert!(matches!(err, DataError::Mismatch { .. }), "{err:?}");
    assert!(err.to_string().contains("label 10"), "{err}");
}

/// A split with 0 images, or test images of another size than the training images, is refused
/// at load with an error naming the files (before: NaN loss and accuracy, or a Linear shape
/// error after a whole epoch).
#[test]
fn mnist_load_rejects_empty_splits_and_size_mismatch() {
    let tmp = TempDir::new("empty-mismatch");
    let root = tmp.0.join("mnist");
    std::fs::create_dir_all(&root).unwrap();
    let write = |name: &str, bytes: &[u8]| std::fs::write(root.join(name), gzip(bytes)).unwrap();
    let px: Vec<u8> = vec![7; 2 * 28 * 28];
    write("train-images-idx3-ubyte.gz", &idx_images(2, 28, 28, &px));
    write("train-labels-idx1-ubyte.gz", &idx_labels(2, &[0, 1]));
    write("t10k-images-idx3-ubyte.gz", &idx_images(0, 28, 28, &[]));
    write("t10k-labels-idx1-ubyte.gz", &idx_labels(0, &[]));
    let err = Mnist::load(&tmp.0, "mnist").unwrap_err();
    assert!(matches!(err, DataError::Mismatch { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("t10k-images-idx3-ubyte.gz") && msg.contains("0 images"),
        "{msg}"
    );

    write(
        "t10k-images-idx3-ubyte.gz",
        &idx_images(1, 14, 14, &px[..196]),
    );
    write("t10k-labels-idx1-ubyte.gz", &idx_labels(1, &[3]));
    let msg = Mnist::load(&tmp.0, "mnist").unwrap_err().to_string();
    assert!(
        msg.contains("t10k-images-idx3-ubyte.gz")
            && msg.contains("train-images-idx3-ubyte.gz")
            && msg.contains("14×14")
            && msg.contains("28×28"),
        "{msg}"
    );
}

// ---------------------------------------------------------------- DataLoader

fn collect(loader: &DataLoader, epoch: u64) -> Vec<Vec<usize>> {
    loader.epoch(epoch).collect()
}

#[test]
fn loader_covers_every_index_once() {
    for (len, bs) in [(10, 3), (12, 4), (1, 5), (0, 2), (1000, 64)] {
        for seed in [None, Some(0), Some(42)] {
            let loader = DataLoader::new(len, bs).unwrap().shuffle(seed);
            for epoch in 0..3 {
                let batches = collect(&loader, epoch);
                assert_eq!(batches.len(), loader.num_batches());
                assert_eq!(loader.epoch(epoch).len(), loader.num_batches());
                let mut all: Vec<usize> = batches.iter().flatten().copied().collect();
                all.sort_unstable();
                assert_eq!(all, (0..len).collect::<Vec<_>>(), "len {len} bs {bs}");
                for (i, b) in batches.iter().enumerate() {
                    if i + 1 < batches.len() {
                        assert_eq!(b.len(), bs);
                    } else {
                        assert!(!b.is_empty() && b.len() <= bs);
                    }
                }
            }
        }
    }
}

#[test]
fn loader_unshuffled_is_in_order() {
    let loader = DataLoader::new(7, 3).unwrap();
    assert_eq!(
        collect(&loader, 5),
        vec![vec![0, 1, 2], vec![3, 4, 5], vec![6]]
    );
}

#[test]
fn loader_seeded_is_deterministic_and_epochs_differ() {
    let a = DataLoader::new(500, 32).unwrap().shuffle(Some(7));
    let b = DataLoader::new(500, 32).unwrap().shuffle(Some(7));
    for epoch in 0..4 {
        assert_eq!(collect(&a, epoch), collect(&b, epoch));
        assert_eq!(collect(&a, epoch), collect(&a, epoch));
    }
    let epochs: HashSet<Vec<Vec<usize>>> = (0..4).map(|e| collect(&a, e)).collect();
    assert_eq!(epochs.len(), 4, "epochs should be shuffled differently");
    let other = DataLoader::new(500, 32).unwrap().shuffle(Some(8));
    assert_ne!(collect(&a, 0), collect(&other, 0));
    // Actually shuffled.
    let unshuffled = DataLoader::new(500, 32).unwrap();
    assert_ne!(collect(&a, 0), collect(&unshuffled, 0));
}

#[test]
fn loader_drop_last() {
    let keep = DataLoader::new(10, 4).unwrap().shuffle(Some(1));
    let drop = keep.clone().drop_last(true);
    assert_eq!(keep.num_batches(), 3);
    assert_eq!(drop.num_batches(), 2);
    let kept = collect(&keep, 0);
    let dropped = collect(&drop, 0);
    assert_eq!(kept.last().unwrap().len(), 2);
    assert_eq!(dropped.len(), 2);
    assert!(dropped.iter().all(|b| b.len() == 4));
    // Same shuffle; drop_last only removes the tail.
    assert_eq!(&kept[..2], &dropped[..]);
    // Exact multiple: nothing dropped.
    let exact = DataLoader::new(8, 4).unwrap().drop_last(true);
    assert_eq!(collect(&exact, 0).len(), 2);
    // Fewer examples than one batch.
    let tiny = DataLoader::new(3, 4).unwrap().drop_last(true);
    assert_eq!(tiny.num_batches(), 0);
    assert_eq!(tiny.epoch(0).count(), 0);
}

#[test]
fn loader_zero_batch_size_is_error() {
    assert_eq!(
        DataLoader::new(10, 0).unwrap_err(),
        LoaderError::ZeroBatchSize
    );
    assert_eq!(
        DataLoader::new(0, 0).unwrap_err(),
        LoaderError::ZeroBatchSize
    );
}

// ---------------------------------------------------------------- data dir

#[test]
fn datasets_folder_is_found_walking_up() {
    let tmp = TempDir::new("upwards");
    let deep = tmp.0.join("a/b/c");
    std::fs::create_dir_all(&deep).unwrap();
    // nothing inside tmp yet: whatever is found lies above it
    assert_eq!(find_datasets_upwards(&deep), find_datasets_upwards(&tmp.0));
    std::fs::create_dir_all(tmp.0.join("datasets")).unwrap();
    assert_eq!(find_datasets_upwards(&deep), Some(tmp.0.join("datasets")));
    // a nearer datasets/ wins
    std::fs::create_dir_all(tmp.0.join("a/datasets")).unwrap();
    assert_eq!(find_datasets_upwards(&deep), Some(tmp.0.join("a/datasets")));
}

#[test]
fn committed_sets_are_in_the_checkout() {
    // MNIST and Tiny Shakespeare are tracked in git, so a fresh clone has them; any folder of
    // the checkout finds them by walking up.
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ds = find_datasets_upwards(&crate_dir.join("src")).expect("datasets/ above the crate");
    for f in [
        "mnist/train-images-idx3-ubyte.gz",
        "mnist/train-labels-idx1-ubyte.gz",
        "mnist/t10k-images-idx3-ubyte.gz",
        "mnist/t10k-labels-idx1-ubyte.gz",
        "tinyshakespeare/input.txt",
        "SHA256SUMS",
        "README.md",
    ] {
        assert!(ds.join(f).is_file(), "{} missing", ds.join(f).display());
    }
    let mnist = Mnist::load(&ds, "mnist").unwrap();
    assert_eq!((mnist.train.n, mnist.test.n), (60_000, 10_000));
}

// ---------------------------------------------------------------- real data

/// Loads `name` from `data_dir()`, or returns `None` (printing why) if it is absent
/// and `CAMEL_REQUIRE_DATA` is off.
fn load_real(name: &str, label: &str) -> Option<Mnist> {
    let dir = data_dir();
    let root = dir.join(name);
    if !root.join("train-images-idx3-ubyte.gz").exists() {
        let msg = format!("{label} not found at {}", root.display());
        if camel_nn::core::config::require_data() {
            panic!("{msg} (CAMEL_REQUIRE_DATA=1)");
        }
        println!("skipped: {msg}");
        return None;
    }
    Some(Mnist::load(&dir, name).unwrap_or_else(|e| panic!("loading {name}: {e}")))
}

fn histogram(labels: &[u8]) -> [usize; 10] {
    let mut h = [0; 10];
    for &l in labels {
        h[l as usize] += 1;
    }
    h
}

fn check_shapes(m: &Mnist) {
    for (split, n) in [(&m.train, 60_000), (&m.test, 10_000)] {
        assert_eq!((split.n, split.rows, split.cols), (n, 28, 28));
        assert_eq!(split.images.len(), n * 784);
        assert_eq!(split.labels.len(), n);
        assert!(split.labels.iter().all(|&l| l < 10));
        assert!(split.images.iter().all(|v| v.is_finite()));
    }
}

#[test]
fn real_mnist() {
    let Some(m) = load_real("mnist", "MNIST") else {
        return;
    };
    check_shapes(&m);
    for (split, n) in [(&m.train, 60_000), (&m.test, 10_000)] {
        let h = histogram(&split.labels);
        let (lo, hi) = (n / 10 * 8 / 10, n / 10 * 12 / 10);
        assert!(
            h.iter().all(|&c| (lo..=hi).contains(&c)),
            "unbalanced: {h:?}"
        );
    }
    // Known first labels of the canonical files.
    assert_eq!(m.train.labels[..5], [5, 0, 4, 1, 9]);
    assert_eq!(m.test.labels[..5], [7, 2, 1, 0, 4]);
    // The normalization constants come from the training set: mean ~0, std ~1.
    let n = m.train.images.len() as f64;
    let mean = m.train.images.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = m
        .train
        .images
        .iter()
        .map(|&v| (v as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    assert!(mean.abs() < 0.01, "mean {mean}");
    assert!((var.sqrt() - 1.0).abs() < 0.01, "std {}", var.sqrt());
}

#[test]
fn real_fashion_mnist() {
    let Some(m) = load_real("fashion-mnist", "Fashion-MNIST") else {
        return;
    };
    check_shapes(&m);
    // Fashion-MNIST is exactly balanced.
    assert_eq!(histogram(&m.train.labels), [6000; 10]);
    assert_eq!(histogram(&m.test.labels), [1000; 10]);
}
