//! State dicts: names, round trips through safetensors, and the errors for missing,
//! unexpected and wrongly shaped entries.

use camel_nn::{
    load_safetensors, save_safetensors, Device, Linear, LinearOptions, Module, ReLU, Sequential,
    StateError, Tensor,
};
use std::collections::HashMap;

fn seeded(seed: u64) -> LinearOptions {
    LinearOptions {
        seed: Some(seed),
        ..Default::default()
    }
}

fn net(seed: u64) -> Sequential {
    Sequential::new()
        .add(Linear::with_options(4, 8, seeded(seed)).unwrap())
        .add(ReLU)
        .add(Linear::with_options(8, 3, seeded(seed + 1)).unwrap())
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("camel-state-{}-{name}", std::process::id()))
}

#[test]
fn names_are_dotted_paths() {
    let names: Vec<String> = net(0).state_dict().into_keys().collect();
    assert_eq!(names, ["0.bias", "0.weight", "2.bias", "2.weight"]);
}

#[test]
fn safetensors_round_trip_restores_outputs() {
    let a = net(0);
    let b = net(10);
    let x = Tensor::randn_seeded(&[5, 4], 3, Device::Cpu).unwrap();
    let ya = a.forward(&x).unwrap().to_vec().unwrap();
    assert_ne!(ya, b.forward(&x).unwrap().to_vec().unwrap());
    let path = tmp("roundtrip.safetensors");
    let meta = HashMap::from([("model".to_string(), "test".to_string())]);
    save_safetensors(&a.state_dict(), Some(meta), &path).unwrap();
    let (state, meta) = load_safetensors(&path, Device::Cpu).unwrap();
    assert_eq!(meta["model"], "test");
    b.load_state_dict(&state).unwrap();
    assert_eq!(ya, b.forward(&x).unwrap().to_vec().unwrap());
    let _ = std::fs::remove_file(path);
}

#[test]
fn bad_entries_are_named_and_change_nothing() {
    let m = net(0);
    let before = m.state_dict()["0.weight"].to_vec().unwrap();
    let other = net(5).state_dict();

    let mut missing = other.clone();
    missing.remove("2.bias");
    let e = m.load_state_dict(&missing).unwrap_err();
    assert!(
        matches!(&e, StateError::Missing(v) if v == &["2.bias"]),
        "{e}"
    );
    assert!(e.to_string().contains("2.bias"), "{e}");

    let mut extra = other.clone();
    extra.insert("3.weight".into(), Tensor::zeros(&[1], Device::Cpu).unwrap());
    let e = m.load_state_dict(&extra).unwrap_err();
    assert!(
        matches!(&e, StateError::Unexpected(v) if v == &["3.weight"]),
        "{e}"
    );

    let mut shaped = other.clone();
    shaped.insert(
        "2.weight".into(),
        Tensor::zeros(&[8, 3], Device::Cpu).unwrap(),
    );
    let e = m.load_state_dict(&shaped).unwrap_err();
    assert!(
        matches!(&e, StateError::Shape { name, .. } if name == "2.weight"),
        "{e}"
    );
    assert!(e.to_string().contains("[8, 3]"), "{e}");

    // none of the failed loads changed a parameter
    assert_eq!(m.state_dict()["0.weight"].to_vec().unwrap(), before);
}

#[test]
fn bad_files_are_errors_naming_the_file() {
    let path = tmp("garbage.safetensors");
    std::fs::write(&path, b"not a safetensors file").unwrap();
    let e = load_safetensors(&path, Device::Cpu).unwrap_err();
    assert!(matches!(e, StateError::Format { .. }), "{e}");
    assert!(e.to_string().contains("garbage.safetensors"), "{e}");
    let _ = std::fs::remove_file(&path);
    let e = load_safetensors(&path, Device::Cpu).unwrap_err();
    assert!(matches!(e, StateError::Io { .. }), "{e}");
}

/// A safetensors file from a raw header and data section.
fn raw(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

#[test]
fn bad_layouts_name_the_file_and_the_tensor() {
    let good = raw(
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[3],"data_offsets":[8,20]}}"#,
        &[0; 20],
    );
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        (
            "truncated",
            good[..good.len() - 4].to_vec(),
            &["\"b\"", "truncated"],
        ),
        ("short", good[..5].to_vec(), &["truncated"]),
        ("header", raw("{\"a\":", &[]), &["corrupt header"]),
        (
            "length",
            {
                let mut v = good.clone();
                v[..8].copy_from_slice(&1_000_000u64.to_le_bytes());
                v
            },
            &["corrupt header", "1000000"],
        ),
        (
            "dtype",
            raw(
                r#"{"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}"#,
                &[0; 8],
            ),
            &["\"w\"", "I64"],
        ),
        (
            "bytes",
            raw(
                r#"{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}"#,
                &[0; 12],
            ),
            &["\"w\"", "16 bytes", "hold 12"],
        ),
    ];
    for (what, bytes, want) in cases {
        let path = tmp(&format!("layout-{what}.safetensors"));
        std::fs::write(&path, bytes).unwrap();
        let e = load_safetensors(&path, Device::Cpu).unwrap_err();
        assert!(matches!(e, StateError::Format { .. }), "{what}: {e}");
        let msg = e.to_string();
        assert!(msg.contains(&format!("layout-{what}")), "{what}: {msg}");
        for w in want {
            assert!(msg.contains(w), "{what}: no {w:?} in {msg}");
        }
        let _ = std::fs::remove_file(&path);
    }
    let path = tmp("layout-good.safetensors");
    std::fs::write(&path, good).unwrap();
    let (state, _) = load_safetensors(&path, Device::Cpu).unwrap();
    assert_eq!(state["b"].shape(), &[3]);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn safetensors_round_trip_is_bit_exact_on_every_device() {
    for dev in camel_nn::testing::devices() {
        let special = [
            0.0f32,
            -0.0,
            1e-40,
            f32::MAX,
            f32::MIN_POSITIVE,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::from_bits(0x7fc0_1234),
            1.0 / 3.0,
        ];
        let t = Tensor::from_vec(special.to_vec(), &[3, 3], dev).unwrap();
        let state = camel_nn::StateDict::from([("x".to_string(), t)]);
        let path = tmp(&format!(
            "bits-{}.safetensors",
            dev.to_string().replace(':', "")
        ));
        save_safetensors(&state, None, &path).unwrap();
        let (back, _) = load_safetensors(&path, dev).unwrap();
        assert_eq!(back["x"].device(), dev);
        let bits = |v: Vec<f32>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(back["x"].to_vec().unwrap()),
            bits(special.to_vec()),
            "{dev:?}"
        );
        let _ = std::fs::remove_file(&path);
    }
}
