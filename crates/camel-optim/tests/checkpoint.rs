//! Checkpoints: a model with its optimizer saved and loaded bit for bit on every device (the
//! next step is identical), metadata, and every bad file — truncated, corrupt header, wrong
//! dtype, a byte length that disagrees with the shape, a missing, unexpected or wrongly shaped
//! model or optimizer entry, no optimizer state — an error naming the file and the tensor that
//! leaves the model and the optimizer as they were.

use camel_nn::testing::devices;
use camel_nn::{
    save_safetensors, Device, Linear, LinearOptions, Module, Result, Sequential, StateDict,
    StateError, Tensor, GELU,
};
use camel_optim::{load_checkpoint, save_checkpoint, save_checkpoint_with, Adam, Optimizer};
use std::collections::HashMap;
use std::path::PathBuf;

/// Test bodies return both camel and checkpoint errors.
type R = std::result::Result<(), Box<dyn std::error::Error>>;

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("camel-ckpt-{}-{name}", std::process::id()))
}

fn model(seed: u64, dev: Device) -> Result<Sequential> {
    let o = |seed| LinearOptions {
        seed: Some(seed),
        ..Default::default()
    };
    let m = Sequential::new()
        .add(Linear::with_options(6, 9, o(seed))?)
        .add(GELU)
        .add(Linear::with_options(9, 4, o(seed + 1))?);
    m.to(dev)?;
    Ok(m)
}

fn step(m: &Sequential, opt: &mut Adam, dev: Device) -> Result<()> {
    let x = Tensor::from_vec(
        (0..18).map(|i| (i as f32 * 0.37).sin()).collect(),
        &[3, 6],
        dev,
    )?;
    opt.zero_grad();
    m.forward(&x)?.square()?.sum()?.backward()?;
    opt.step()
}

fn bits_of(state: &StateDict) -> Result<Vec<(String, Vec<u32>)>> {
    state
        .iter()
        .map(|(k, t)| Ok((k.clone(), t.to_vec()?.iter().map(|x| x.to_bits()).collect())))
        .collect()
}

/// A trained model and its optimizer, with special values in the weights.
fn trained(dev: Device) -> Result<(Sequential, Adam)> {
    let m = model(1, dev)?;
    let mut opt = Adam::adamw(m.parameters(), 1e-2, 0.1)?;
    step(&m, &mut opt, dev)?;
    step(&m, &mut opt, dev)?;
    let w = &m.named_parameters()[1].1; // 0.weight
    let mut v = w.tensor().to_vec()?;
    v[0] = -0.0;
    v[1] = 1e-40; // subnormal
    v[2] = f32::MAX;
    w.set(&Tensor::from_vec(v, w.tensor().shape(), Device::Cpu)?)?;
    Ok((m, opt))
}

#[test]
fn round_trip_is_bit_exact_and_continues_identically() -> R {
    for dev in devices() {
        let (a, mut oa) = trained(dev)?;
        let path = tmp(&format!(
            "roundtrip-{}.safetensors",
            dev.to_string().replace(':', "")
        ));
        let meta = HashMap::from([("n_layer".to_string(), "2".to_string())]);
        save_checkpoint_with(&path, &a, Some(&oa), meta)?;

        let b = model(50, dev)?;
        let mut ob = Adam::adamw(b.parameters(), 1e-2, 0.1)?;
        assert_ne!(bits_of(&a.state_dict())?, bits_of(&b.state_dict())?);
        let meta = load_checkpoint(&path, &b, Some(&mut ob))?;
        assert_eq!(meta["n_layer"], "2");
        assert_eq!(meta["format"], "camel-checkpoint");
        assert_eq!(meta["optimizer"], "yes");
        assert_eq!(
            bits_of(&a.state_dict())?,
            bits_of(&b.state_dict())?,
            "{dev:?}"
        );
        assert_eq!(
            bits_of(&oa.state_dict()?)?,
            bits_of(&ob.state_dict()?)?,
            "{dev:?}"
        );
        for p in b.parameters() {
            assert_eq!(p.tensor().device(), dev);
        }
        step(&a, &mut oa, dev)?;
        step(&b, &mut ob, dev)?;
        assert_eq!(
            bits_of(&a.state_dict())?,
            bits_of(&b.state_dict())?,
            "{dev:?}"
        );

        // weights alone: no optimizer saved, none loaded
        save_checkpoint(&path, &a, None)?;
        let c = model(70, dev)?;
        let meta = load_checkpoint(&path, &c, None)?;
        assert_eq!(meta["optimizer"], "no");
        assert_eq!(
            bits_of(&a.state_dict())?,
            bits_of(&c.state_dict())?,
            "{dev:?}"
        );
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}

/// A safetensors file from a raw header and data section.
fn raw(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

/// The full state a checkpoint of `m` and `opt` holds.
fn full_state(m: &Sequential, opt: &Adam) -> Result<StateDict> {
    let mut s = m.state_dict();
    for (k, t) in opt.state_dict()? {
        s.insert(format!("optim.{k}"), t);
    }
    Ok(s)
}

#[test]
fn bad_checkpoints_name_the_file_and_tensor_and_change_nothing() -> R {
    for dev in devices() {
        let (m, mut opt) = trained(dev)?;
        let good = tmp("good.safetensors");
        save_checkpoint(&good, &m, Some(&opt))?;
        let good_bytes = std::fs::read(&good).unwrap();
        let full = full_state(&m, &opt)?;
        let names: Vec<String> = full.keys().cloned().collect();

        let cases: Vec<(&str, Vec<u8>, Vec<&str>)> = {
            let mut v: Vec<(&str, Vec<u8>, Vec<&str>)> = Vec::new();
            let cut = good_bytes[..good_bytes.len() - 10].to_vec();
            v.push(("truncated", cut, vec!["truncated"]));
            let mut header = good_bytes.clone();
            header[8] = b'x'; // the JSON's opening brace
            v.push(("corrupt header", header, vec!["corrupt header"]));
            let mut length = good_bytes.clone();
            length[..8].copy_from_slice(&u64::MAX.to_le_bytes());
            v.push(("header length", length, vec!["corrupt header"]));
            v.push((
                "wrong dtype",
                raw(
                    r#"{"0.weight":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}"#,
                    &[0; 4],
                ),
                vec!["\"0.weight\"", "F16"],
            ));
            v.push((
                "length disagrees with shape",
                raw(
                    r#"{"2.bias":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}}"#,
                    &[0; 20],
                ),
                vec!["\"2.bias\"", "24 bytes"],
            ));
            v.push(("only 4 bytes", good_bytes[..4].to_vec(), vec!["truncated"]));
            v
        };
        let mut states: Vec<(&str, StateDict, Vec<&str>)> = Vec::new();
        let mut s = full.clone();
        s.remove("2.bias");
        states.push(("missing", s, vec!["2.bias"]));
        let mut s = full.clone();
        s.insert("3.weight".into(), Tensor::zeros(&[2], Device::Cpu)?);
        states.push(("unexpected", s, vec!["3.weight"]));
        let mut s = full.clone();
        s.insert("2.weight".into(), Tensor::zeros(&[9, 4], Device::Cpu)?);
        states.push(("mis-shaped", s, vec!["2.weight", "[9, 4]"]));
        let mut s = full.clone();
        s.insert(
            "optim.state.0.exp_avg".into(),
            Tensor::zeros(&[3], Device::Cpu)?,
        );
        states.push(("optimizer mis-shaped", s, vec!["state.0.exp_avg"]));
        let mut s = full.clone();
        s.remove("optim.state.1.step");
        states.push(("optimizer missing", s, vec!["state.1.step"]));
        let s: StateDict = full
            .iter()
            .filter(|(k, _)| !k.starts_with("optim."))
            .map(|(k, t)| (k.clone(), t.clone()))
            .collect();
        states.push(("no optimizer state", s, vec!["optim."]));

        let model_before = bits_of(&m.state_dict())?;
        let opt_before = bits_of(&opt.state_dict()?)?;
        let mut check = |what: &str, path: &PathBuf, want: &[&str]| {
            let e: StateError = load_checkpoint(path, &m, Some(&mut opt)).unwrap_err();
            let msg = e.to_string();
            let file = path.file_name().unwrap().to_str().unwrap();
            assert!(msg.contains(file), "{dev:?} {what}: no file name in {msg}");
            for w in want {
                assert!(msg.contains(w), "{dev:?} {what}: no {w:?} in {msg}");
            }
            if what == "truncated" {
                assert!(
                    names.iter().any(|n| msg.contains(&format!("{n:?}"))),
                    "{dev:?} {what}: no tensor named in {msg}"
                );
            }
            assert_eq!(
                bits_of(&m.state_dict()).unwrap(),
                model_before,
                "{dev:?} {what}"
            );
            assert_eq!(
                bits_of(&opt.state_dict().unwrap()).unwrap(),
                opt_before,
                "{dev:?} {what}: the optimizer changed"
            );
        };
        for (what, bytes, want) in &cases {
            let path = tmp(&format!("bad-{}.safetensors", what.replace(' ', "_")));
            std::fs::write(&path, bytes).unwrap();
            check(what, &path, want);
            let _ = std::fs::remove_file(&path);
        }
        for (what, state, want) in &states {
            let path = tmp(&format!("bad-{}.safetensors", what.replace(' ', "_")));
            save_safetensors(state, None, &path)?;
            check(what, &path, want);
            let _ = std::fs::remove_file(&path);
        }
        // a missing file
        let gone = tmp("missing.safetensors");
        let e = load_checkpoint(&gone, &m, None).unwrap_err();
        assert!(matches!(e, StateError::Io { .. }), "{e}");
        assert!(e.to_string().contains("missing.safetensors"), "{e}");

        // and the good file still loads
        load_checkpoint(&good, &m, Some(&mut opt))?;
        let _ = std::fs::remove_file(&good);
    }
    Ok(())
}

#[test]
fn a_model_entry_named_like_the_optimizer_is_refused() -> R {
    #[derive(Debug)]
    struct Odd(camel_nn::Parameter);
    impl Module for Odd {
        fn forward(&self, x: &Tensor) -> Result<Tensor> {
            Ok(x.clone())
        }
        fn named_parameters(&self) -> Vec<(String, camel_nn::Parameter)> {
            vec![("optim.w".into(), self.0.clone())]
        }
        fn set_training(&self, _: bool) {}
        fn is_training(&self) -> bool {
            true
        }
    }
    let m = Odd(camel_nn::Parameter::new(Tensor::zeros(&[1], Device::Cpu)?)?);
    let path = tmp("odd.safetensors");
    let e = save_checkpoint(&path, &m, None).unwrap_err();
    assert!(e.to_string().contains("optim.w"), "{e}");
    assert!(!path.exists());
    Ok(())
}
