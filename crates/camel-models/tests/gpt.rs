//! GPT-mini: the character tokenizer, the Tiny Shakespeare loader, the model (nanoGPT's names,
//! cached generation equal to the full forward, seeded sampling), the `camel train gpt` /
//! `camel generate` commands with their bad inputs, and CI's short training run on the CPU.

mod common;
use camel_models::data::{data_dir, CharTokenizer, TextData, TextSplit, TokenizerError};
use camel_models::gpt::{GptCache, GptConfig, GptMini};
use camel_models::train::{train_gpt, GptTrainConfig};
use camel_nn::testing::devices;
use camel_nn::{no_grad, Device, Generator, Module, Tensor};
use common::{camel, text, TempDir};

// ---------------------------------------------------------------- tokenizer

#[test]
fn tokenizer_round_trips_and_sorts_its_vocabulary() {
    let text = "hello, world!\nÆble";
    let tok = CharTokenizer::from_text(text).unwrap();
    let mut want: Vec<char> = text.chars().collect();
    want.sort();
    want.dedup();
    assert_eq!(tok.vocab(), &want[..]);
    assert_eq!(tok.vocab_size(), want.len());
    let ids = tok.encode(text).unwrap();
    assert_eq!(ids.len(), text.chars().count());
    assert_eq!(ids[0], want.iter().position(|&c| c == 'h').unwrap() as i64);
    assert_eq!(tok.decode(&ids).unwrap(), text);
    // saved and loaded through JSON, the same tokenizer
    let back = CharTokenizer::from_json(&tok.to_json()).unwrap();
    assert_eq!(back, tok);
    let dir = std::env::temp_dir().join(format!("camel-gpt-tok-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tokenizer.json");
    tok.save(&path).unwrap();
    assert_eq!(CharTokenizer::load(&path).unwrap(), tok);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tokenizer_errors_name_the_character_and_its_position() {
    let tok = CharTokenizer::from_text("abc").unwrap();
    let err = tok.encode("abxc").unwrap_err();
    assert_eq!(
        err,
        TokenizerError::UnknownChar {
            ch: 'x',
            position: 2,
            vocab_size: 3
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("'x'") && msg.contains("position 2"), "{msg}");
    let err = tok.decode(&[0, 1, 3]).unwrap_err();
    assert!(matches!(
        err,
        TokenizerError::UnknownId {
            id: 3,
            position: 2,
            ..
        }
    ));
    assert!(tok.decode(&[-1]).is_err());
    assert!(CharTokenizer::from_text("").is_err());
    assert!(CharTokenizer::from_vocab(vec!['b', 'a']).is_err());
    assert!(CharTokenizer::from_vocab(vec!['a', 'a']).is_err());
    assert!(CharTokenizer::from_json("{\"type\": \"bpe\", \"vocab\": \"ab\"}").is_err());
    assert!(CharTokenizer::from_json("not json").is_err());
}

// ---------------------------------------------------------------- loader

#[test]
fn text_data_splits_90_10_and_draws_shifted_windows() {
    let text: String = (0..1000)
        .map(|i| (b'a' + (i * 7 % 26) as u8) as char)
        .collect();
    let data = TextData::from_text(&text).unwrap();
    assert_eq!(data.train.len(), 900);
    assert_eq!(data.val.len(), 100);
    let all = data.tokenizer.encode(&text).unwrap();
    assert_eq!([&data.train[..], &data.val[..]].concat(), all);
    for split in [TextSplit::Train, TextSplit::Val] {
        let tokens = data.tokens(split);
        let mut g = Generator::new(3);
        let (x, y) = data.batch(split, 7, 13, &mut g, Device::Cpu).unwrap();
        assert_eq!(x.shape(), &[7, 13]);
        assert_eq!(y.shape(), &[7, 13]);
        let (x, y) = (x.to_vec_i64().unwrap(), y.to_vec_i64().unwrap());
        for r in 0..7 {
            let xr = &x[r * 13..(r + 1) * 13];
            let yr = &y[r * 13..(r + 1) * 13];
            // each row is a window of the split, and y is x shifted by one
            let start = (0..=tokens.len() - 14)
                .find(|&s| &tokens[s..s + 13] == xr && &tokens[s + 1..s + 14] == yr);
            assert!(start.is_some(), "{split:?} row {r} is not a window");
        }
        // the same seed draws the same batch, another seed another
        let again = data
            .batch(split, 7, 13, &mut Generator::new(3), Device::Cpu)
            .unwrap();
        assert_eq!(again.0.to_vec_i64().unwrap(), x);
        let other = data
            .batch(split, 7, 13, &mut Generator::new(4), Device::Cpu)
            .unwrap();
        assert_ne!(other.0.to_vec_i64().unwrap(), x);
    }
    // a window of exactly the split's length is the whole split
    let (x, _) = data
        .batch(TextSplit::Val, 2, 99, &mut Generator::new(0), Device::Cpu)
        .unwrap();
    assert_eq!(x.to_vec_i64().unwrap()[..99], data.val[..99]);
    let err = data
        .batch(TextSplit::Val, 2, 100, &mut Generator::new(0), Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("100 tokens") && err.contains("101"), "{err}");
    assert!(data
        .batch(TextSplit::Train, 0, 8, &mut Generator::new(0), Device::Cpu)
        .is_err());
}

#[test]
fn missing_text_file_is_an_error_naming_it() {
    let dir = std::env::temp_dir().join(format!("camel-gpt-nodata-{}", std::process::id()));
    let err = TextData::shakespeare(&dir).unwrap_err().to_string();
    assert!(
        err.contains("tinyshakespeare") && err.contains("input.txt") && err.contains("not found"),
        "{err}"
    );
}

#[test]
fn tiny_shakespeare_has_65_characters() {
    let data = match TextData::shakespeare(&data_dir()) {
        Ok(d) => d,
        Err(e) => {
            if camel_nn::core::config::require_data() {
                panic!("Tiny Shakespeare required (CAMEL_REQUIRE_DATA=1): {e}");
            }
            eprintln!("skipped: Tiny Shakespeare not found ({e})");
            return;
        }
    };
    assert_eq!(data.tokenizer.vocab_size(), 65);
    assert_eq!(data.train.len() + data.val.len(), 1_115_394);
    assert_eq!(data.train.len(), 1_003_854);
}

// ---------------------------------------------------------------- model

fn tiny(vocab: usize, block: usize) -> GptConfig {
    GptConfig {
        vocab_size: vocab,
        block_size: block,
        n_layer: 2,
        n_head: 2,
        n_embd: 16,
        dropout: 0.0,
        bias: true,
        tie_weights: false,
        fused_attention: true,
    }
}

#[test]
fn parameter_names_are_nanogpts() {
    let cfg = tiny(11, 8);
    let model = GptMini::with_seed(&cfg, 0, Device::Cpu).unwrap();
    let names: Vec<String> = model
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let mut want = vec!["wte.weight".to_string(), "wpe.weight".to_string()];
    for i in 0..2 {
        for n in [
            "ln_1.weight",
            "ln_1.bias",
            "attn.c_attn.weight",
            "attn.c_attn.bias",
            "attn.c_proj.weight",
            "attn.c_proj.bias",
            "ln_2.weight",
            "ln_2.bias",
            "mlp.c_fc.weight",
            "mlp.c_fc.bias",
            "mlp.c_proj.weight",
            "mlp.c_proj.bias",
        ] {
            want.push(format!("h.{i}.{n}"));
        }
    }
    want.extend(["ln_f.weight", "ln_f.bias", "lm_head.weight"].map(String::from));
    let (mut a, mut b) = (names.clone(), want.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b);
    let shape = |n: &str| {
        model
            .named_parameters()
            .into_iter()
            .find(|(k, _)| k == n)
            .unwrap()
            .1
            .tensor()
            .shape()
            .to_vec()
    };
    assert_eq!(shape("h.0.attn.c_attn.weight"), [48, 16]);
    assert_eq!(shape("lm_head.weight"), [11, 16]);
    assert_eq!(shape("wpe.weight"), [8, 16]);
    // nanoGPT's init: std 0.02, residual projections 0.02/√(2·n_layer), biases zero
    let std = |n: &str| {
        let v = model
            .named_parameters()
            .into_iter()
            .find(|(k, _)| k == n)
            .unwrap()
            .1
            .tensor()
            .to_vec()
            .unwrap();
        let m = v.iter().sum::<f32>() / v.len() as f32;
        (v.iter().map(|x| (x - m).powi(2)).sum::<f32>() / v.len() as f32).sqrt()
    };
    let s = std("h.0.mlp.c_fc.weight");
    assert!((s - 0.02).abs() < 0.003, "c_fc std {s}");
    let s = std("h.1.mlp.c_proj.weight");
    assert!((s - 0.01).abs() < 0.0015, "c_proj std {s}");
    assert_eq!(std("h.0.attn.c_attn.bias"), 0.0);
    // tied: no lm_head.weight, one matrix fewer
    let tied = GptMini::with_seed(
        &GptConfig {
            tie_weights: true,
            ..cfg
        },
        0,
        Device::Cpu,
    )
    .unwrap();
    assert!(tied
        .named_parameters()
        .iter()
        .all(|(n, _)| n != "lm_head.weight"));
    assert_eq!(tied.num_parameters() + 11 * 16, model.num_parameters());
}

#[test]
fn bad_configs_are_errors() {
    let err = GptMini::with_seed(
        &GptConfig {
            n_embd: 18,
            n_head: 4,
            ..tiny(5, 8)
        },
        0,
        Device::Cpu,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("n_embd (18) must be divisible by n_head (4)"),
        "{err}"
    );
    for cfg in [
        GptConfig {
            vocab_size: 0,
            ..tiny(5, 8)
        },
        GptConfig {
            block_size: 0,
            ..tiny(5, 8)
        },
        GptConfig {
            dropout: 1.0,
            ..tiny(5, 8)
        },
        GptConfig {
            dropout: f32::NAN,
            ..tiny(5, 8)
        },
    ] {
        assert!(GptMini::with_seed(&cfg, 0, Device::Cpu).is_err(), "{cfg:?}");
    }
    let model = GptMini::with_seed(&tiny(5, 8), 0, Device::Cpu).unwrap();
    // a sequence longer than the block, a 1-D input, an empty one
    for (v, shape) in [
        (vec![0i64; 9], vec![1, 9]),
        (vec![0; 4], vec![4]),
        (vec![], vec![1, 0]),
    ] {
        let idx = Tensor::from_vec_i64(v, &shape, Device::Cpu).unwrap();
        assert!(model.forward(&idx).is_err(), "{shape:?}");
    }
}

/// `[B, T, V]` logits as rows of the last position `t` of batch 0.
fn row(logits: &Tensor, t: usize) -> Vec<f32> {
    let v = logits.shape()[2];
    logits.to_vec().unwrap()[t * v..(t + 1) * v].to_vec()
}

#[test]
fn cached_logits_equal_the_full_forward_on_every_device() {
    for dev in devices() {
        let cfg = tiny(13, 12);
        let model = GptMini::with_seed(&cfg, 7, dev).unwrap();
        model.eval();
        let toks: Vec<i64> = (0..12).map(|i| (i * 5 + 3) % 13).collect();
        no_grad(|| {
            let full = model
                .logits(&Tensor::from_vec_i64(toks.clone(), &[1, 12], dev).unwrap())
                .unwrap();
            assert_eq!(full.shape(), &[1, 12, 13]);
            // a prompt of 5 positions at once, then one position at a time
            let mut cache = GptCache::new(cfg.n_layer);
            let first = model
                .forward_cached(
                    &Tensor::from_vec_i64(toks[..5].to_vec(), &[1, 5], dev).unwrap(),
                    &mut cache,
                )
                .unwrap();
            assert_eq!(cache.len(), 5);
            let mut got: Vec<Vec<f32>> = (0..5).map(|t| row(&first, t)).collect();
            for &t in &toks[5..] {
                let l = model
                    .forward_cached(
                        &Tensor::from_vec_i64(vec![t], &[1, 1], dev).unwrap(),
                        &mut cache,
                    )
                    .unwrap();
                got.push(row(&l, 0));
            }
            assert_eq!(cache.len(), 12);
            for (t, g) in got.iter().enumerate() {
                for (a, b) in g.iter().zip(row(&full, t)) {
                    assert!(
                        (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                        "{dev} position {t}: {a} vs {b}"
                    );
                }
            }
            // the cache is full: one more position is an error, not a wrong answer
            let err = model
                .forward_cached(
                    &Tensor::from_vec_i64(vec![0], &[1, 1], dev).unwrap(),
                    &mut cache,
                )
                .unwrap_err()
                .to_string();
            assert!(err.contains("block size 12"), "{err}");
        });
    }
}

#[test]
fn generation_is_deterministic_for_a_seed_on_every_device() {
    for dev in devices() {
        let cfg = tiny(9, 8);
        let model = GptMini::with_seed(&cfg, 1, dev).unwrap();
        let prompt = [1i64, 2, 3];
        // 30 new tokens: past the block size of 8, so the window slides
        let a = model
            .generate(&prompt, 30, 1.0, None, &mut Generator::new(5))
            .unwrap();
        let b = model
            .generate(&prompt, 30, 1.0, None, &mut Generator::new(5))
            .unwrap();
        let c = model
            .generate(&prompt, 30, 1.0, None, &mut Generator::new(6))
            .unwrap();
        assert_eq!(a.len(), 33);
        assert_eq!(&a[..3], &prompt);
        assert!(a.iter().all(|&t| (0..9).contains(&t)));
        assert_eq!(a, b, "{dev}");
        assert_ne!(a, c, "{dev}: another seed gave the same 30 tokens");
        // top-k = 1 is greedy whatever the seed; so is temperature 0
        let k1 = model
            .generate(&prompt, 10, 1.0, Some(1), &mut Generator::new(9))
            .unwrap();
        let t0 = model
            .generate(&prompt, 10, 0.0, None, &mut Generator::new(10))
            .unwrap();
        assert_eq!(k1, t0, "{dev}");
        // greedy = the argmax of the full forward, token after token (inside the block)
        let mut seq = prompt.to_vec();
        for _ in 0..5 {
            let l = no_grad(|| {
                model.logits(&Tensor::from_vec_i64(seq.clone(), &[1, seq.len()], dev).unwrap())
            })
            .unwrap();
            let last = row(&l, seq.len() - 1);
            let arg = (0..last.len()).fold(0, |b, i| if last[i] > last[b] { i } else { b });
            seq.push(arg as i64);
        }
        assert_eq!(&t0[..8], &seq[..], "{dev}");
        // a prompt longer than the block is cropped to its last block_size tokens
        let long: Vec<i64> = (0..20).map(|i| i % 9).collect();
        let out = model
            .generate(&long, 4, 0.0, None, &mut Generator::new(0))
            .unwrap();
        assert_eq!(out.len(), 24);
        let cropped = model
            .generate(&long[12..], 1, 0.0, None, &mut Generator::new(0))
            .unwrap();
        assert_eq!(out[20], cropped[8], "{dev}");
        // 0 new tokens return the prompt
        assert_eq!(
            model
                .generate(&prompt, 0, 1.0, None, &mut Generator::new(0))
                .unwrap(),
            prompt
        );
        // the training flag is restored
        model.train();
        model
            .generate(&prompt, 1, 1.0, None, &mut Generator::new(0))
            .unwrap();
        assert!(model.is_training());
    }
}

#[test]
fn generation_bad_inputs_are_errors() {
    let model = GptMini::with_seed(&tiny(9, 8), 1, Device::Cpu).unwrap();
    let g = &mut Generator::new(0);
    let err = |r: camel_models::Result<Vec<i64>>| r.unwrap_err().to_string();
    let e = err(model.generate(&[1], 3, 1.0, Some(0), g));
    assert!(e.contains("top_k must be at least 1"), "{e}");
    let e = err(model.generate(&[], 3, 1.0, None, g));
    assert!(e.contains("prompt is empty"), "{e}");
    let e = err(model.generate(&[1, 9], 3, 1.0, None, g));
    assert!(e.contains("token 9 at position 1"), "{e}");
    for t in [-1.0, f32::NAN, f32::INFINITY] {
        let e = err(model.generate(&[1], 3, t, None, g));
        assert!(e.contains("temperature"), "{e}");
    }
    let e = err(model.generate_in(&[1], 3, 1.0, None, 9, g));
    assert!(
        e.contains("context (9 tokens)") && e.contains("block size (8)"),
        "{e}"
    );
    // top-k above the vocabulary keeps every token
    assert!(model.generate(&[1], 3, 1.0, Some(100), g).is_ok());
}

#[test]
fn sample_follows_the_softmax_of_the_tempered_logits() {
    use camel_models::gpt::sample;
    let g = &mut Generator::new(0);
    // p = (1/4, 3/4) at temperature 1; (1/10, 9/10) at temperature 1/2
    for (t, p1) in [(1.0f32, 0.75f64), (0.5, 0.9)] {
        let n = 20_000;
        let ones = (0..n)
            .filter(|_| sample(&[0.0, 3f32.ln()], t, None, g).unwrap() == 1)
            .count();
        let f = ones as f64 / n as f64;
        // 5 standard deviations
        let sd = (p1 * (1.0 - p1) / n as f64).sqrt();
        assert!((f - p1).abs() < 5.0 * sd, "temperature {t}: {f} vs {p1}");
    }
    // top-k keeps the k largest: token 0 is never drawn with k = 2 of [0, 5, 5.1]
    assert!((0..1000).all(|_| sample(&[0.0, 5.0, 5.1], 1.0, Some(2), g).unwrap() != 0));
    // greedy takes the first of equal maxima; infinities and NaN
    assert_eq!(sample(&[1.0, 3.0, 3.0], 0.0, None, g).unwrap(), 1);
    assert_eq!(sample(&[0.0, f32::INFINITY], 1.0, None, g).unwrap(), 1);
    assert_eq!(sample(&[f32::NEG_INFINITY, 0.0], 1.0, None, g).unwrap(), 1);
    let e = sample(&[0.0, f32::NAN], 1.0, None, g).unwrap_err();
    assert!(e.contains("token 1 is NaN"), "{e}");
}

// ---------------------------------------------------------------- training

fn shakespeare() -> Option<TextData> {
    match TextData::shakespeare(&data_dir()) {
        Ok(d) => Some(d),
        Err(e) => {
            if camel_nn::core::config::require_data() {
                panic!("Tiny Shakespeare required (CAMEL_REQUIRE_DATA=1): {e}");
            }
            eprintln!("skipped: Tiny Shakespeare not found ({e})");
            None
        }
    }
}

/// CI's check that the model learns: a tiny GPT trained for a few hundred steps on the CPU
/// must take its validation loss well below the uniform baseline ln 65 ≈ 4.17.
#[test]
fn tiny_gpt_learns_tiny_shakespeare_on_the_cpu() {
    let Some(data) = shakespeare() else { return };
    let cfg = GptTrainConfig {
        model: GptConfig {
            vocab_size: data.tokenizer.vocab_size(),
            block_size: 32,
            n_layer: 2,
            n_head: 4,
            n_embd: 64,
            dropout: 0.0,
            bias: true,
            tie_weights: false,
            fused_attention: true,
        },
        batch_size: 32,
        lr: 3e-3,
        min_lr: 3e-4,
        warmup: 20,
        iters: 300,
        eval_interval: 100,
        eval_iters: 10,
        weight_decay: 0.1,
        grad_clip: 1.0,
        betas: [0.9, 0.99],
        seed: 0,
        precision: Default::default(),
    };
    let model = GptMini::with_seed(&cfg.model, 0, Device::Cpu).unwrap();
    let mut evals = Vec::new();
    let t = std::time::Instant::now();
    let best = train_gpt(
        &model,
        &data,
        &cfg,
        Device::Cpu,
        |_| {},
        |e| {
            evals.push(*e);
            Ok(())
        },
    )
    .unwrap();
    eprintln!("{:.1}s: {evals:?}", t.elapsed().as_secs_f64());
    assert_eq!(
        evals.iter().map(|e| e.iter).collect::<Vec<_>>(),
        [0, 100, 200, 300]
    );
    let first = evals[0].val_loss;
    assert!(
        (first - 65f32.ln()).abs() < 0.3,
        "initial val loss {first}, expected ≈ ln 65"
    );
    assert!(
        best < 2.5,
        "best val loss {best} after 300 steps (expected < 2.5)"
    );
    assert!(evals.last().unwrap().train_loss < 2.5);
    // sampling from it writes characters of the text
    let prompt = data.tokenizer.encode("ROMEO:").unwrap();
    let ids = model
        .generate(&prompt, 40, 0.8, Some(10), &mut Generator::new(0))
        .unwrap();
    let text = data.tokenizer.decode(&ids).unwrap();
    assert!(
        text.starts_with("ROMEO:") && text.chars().count() == 46,
        "{text:?}"
    );
}

/// The same run on every device: the same initial weights and batches give the same first
/// evaluation, and a few steps lower the loss on each.
#[test]
fn training_runs_alike_on_every_device() {
    let Some(data) = shakespeare() else { return };
    let cfg = GptTrainConfig {
        model: GptConfig {
            vocab_size: data.tokenizer.vocab_size(),
            block_size: 24,
            n_layer: 2,
            n_head: 3,
            n_embd: 48,
            dropout: 0.1,
            bias: true,
            tie_weights: true,
            fused_attention: true,
        },
        batch_size: 7,
        lr: 3e-3,
        min_lr: 3e-4,
        warmup: 5,
        iters: 40,
        eval_interval: 40,
        eval_iters: 3,
        weight_decay: 0.1,
        grad_clip: 1.0,
        betas: [0.9, 0.99],
        seed: 1,
        precision: Default::default(),
    };
    let mut first = Vec::new();
    for dev in devices() {
        camel_nn::manual_seed(1);
        let model = GptMini::with_seed(&cfg.model, 1, dev).unwrap();
        let mut evals = Vec::new();
        train_gpt(
            &model,
            &data,
            &cfg,
            dev,
            |_| {},
            |e| {
                evals.push(*e);
                Ok(())
            },
        )
        .unwrap();
        eprintln!("{dev}: {evals:?}");
        assert_eq!(evals.len(), 2, "{dev}");
        assert!(
            evals[1].val_loss < evals[0].val_loss - 0.5,
            "{dev}: {evals:?}"
        );
        first.push((dev, evals[0].val_loss, evals[0].train_loss));
    }
    let (_, v0, t0) = first[0];
    for &(dev, v, t) in &first[1..] {
        assert!(
            (v - v0).abs() < 1e-3 && (t - t0).abs() < 1e-3,
            "{dev}: {v} {t} vs cpu {v0} {t0}"
        );
    }
}

// ---------------------------------------------------------------- the camel program

#[test]
fn train_gpt_rejects_bad_arguments_before_reading_data() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--n-embd", "130", "--n-head", "4"],
            "--n-embd (130) must be divisible by --n-head (4)",
        ),
        (&["--n-layer", "0"], "--n-layer must be at least 1, got 0"),
        (
            &["--block-size", "-3"],
            "--block-size must be at least 1, got -3",
        ),
        (&["--dropout", "1"], "--dropout must be in [0, 1), got 1"),
        (&["--lr", "0"], "--lr must be finite and greater than 0"),
        (
            &["--min-lr", "0.1"],
            "--min-lr (0.1) must not exceed --lr (0.001)",
        ),
        (&["--iters", "0"], "--iters must be at least 1"),
        (&["--eval-iters", "0"], "--eval-iters must be at least 1"),
        (
            &["--grad-clip", "-1"],
            "--grad-clip must be finite and at least 0",
        ),
        (&["--betas", "0.9,1"], "β₂) must be in [0, 1), got 1"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["train", "gpt", "--data-dir", "/nonexistent/camel-data"];
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
    }
    // the preset fills what the flags leave out: 384 is not divisible by 5 heads
    let out = camel(&[
        "train",
        "gpt",
        "--preset",
        "shakespeare-char",
        "--n-head",
        "5",
        "--data-dir",
        "/nonexistent",
    ]);
    assert!(text(&out.stderr).contains("--n-embd (384) must be divisible by --n-head (5)"));
}

#[test]
fn train_gpt_with_missing_data_names_the_file() {
    let dir = TempDir::new("missing");
    let out_dir = dir.0.join("run");
    let out = camel(&[
        "train",
        "gpt",
        "--data-dir",
        dir.0.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("tinyshakespeare/input.txt") && err.contains("not found"),
        "{err}"
    );
    assert!(!out_dir.exists(), "a failed run left a folder behind");
}

#[test]
fn train_then_generate_and_the_bad_inputs_of_generate() {
    let Some(_) = shakespeare() else { return };
    let dir = TempDir::new("run");
    let run = dir.0.join("run");
    let run_s = run.to_str().unwrap();
    let out = camel(&[
        "--quiet",
        "train",
        "gpt",
        "--n-layer",
        "1",
        "--n-head",
        "2",
        "--n-embd",
        "16",
        "--block-size",
        "16",
        "--batch-size",
        "4",
        "--iters",
        "4",
        "--eval-interval",
        "2",
        "--eval-iters",
        "2",
        "--warmup",
        "1",
        "--out",
        run_s,
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        stdout.lines().filter(|l| l.contains("val loss")).count(),
        3,
        "{stdout}"
    );
    for f in [
        "config.json",
        "tokenizer.json",
        "model.safetensors",
        "metrics.jsonl",
        "plot.png",
    ] {
        assert!(run.join(f).is_file(), "{f} missing");
    }
    let gen = |extra: &[&str]| {
        let mut a = vec!["generate", "--checkpoint", run_s, "--tokens", "20"];
        a.extend_from_slice(extra);
        camel(&a)
    };
    // deterministic for a seed; the output starts with the prompt
    let a = gen(&["--prompt", "ROMEO:", "--seed", "3"]);
    let b = gen(&["--prompt", "ROMEO:", "--seed", "3"]);
    assert!(a.status.success(), "{}", text(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    assert!(text(&a.stdout).starts_with("ROMEO:"));
    let printed = text(&a.stdout);
    assert_eq!(
        printed.strip_suffix('\n').unwrap().chars().count(),
        26,
        "{printed:?}"
    );
    // the model file itself names the run too
    let c = camel(&[
        "generate",
        "--checkpoint",
        run.join("model.safetensors").to_str().unwrap(),
        "--prompt",
        "ROMEO:",
        "--seed",
        "3",
        "--tokens",
        "20",
    ]);
    assert_eq!(c.stdout, a.stdout);
    // temperature 0 is greedy: the same text whatever the seed
    let g1 = gen(&["--temperature", "0", "--seed", "1"]);
    let g2 = gen(&["--temperature", "0", "--seed", "2"]);
    assert!(g1.status.success(), "{}", text(&g1.stderr));
    assert_eq!(g1.stdout, g2.stdout);
    // bad inputs: each a usage error saying what is wrong
    let cases: &[(&[&str], &str)] = &[
        (&["--top-k", "0"], "--top-k must be at least 1"),
        (
            &["--prompt", "ROMEO€"],
            "character '€' (U+20AC) at position 5 is not in the vocabulary",
        ),
        (
            &["--block-size", "17"],
            "--block-size 17 is larger than the checkpoint's block size 16",
        ),
        (
            &["--temperature", "-1"],
            "--temperature must be finite and at least 0",
        ),
        (&["--prompt", ""], "--prompt is empty"),
    ];
    for (extra, want) in cases {
        let out = gen(extra);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.contains(want),
            "{extra:?}: expected {want:?} in {err:?}"
        );
        assert!(out.stdout.is_empty());
    }
    // a smaller context than the block is allowed
    assert!(gen(&["--block-size", "4"]).status.success());
}

#[test]
fn generate_refuses_a_checkpoint_of_another_model() {
    let dir = TempDir::new("mlp");
    std::fs::write(
        dir.0.join("config.json"),
        r#"{"model": "mlp", "data": "mnist", "hidden": [8]}"#,
    )
    .unwrap();
    let out = camel(&["generate", "--checkpoint", dir.0.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("config.json")
            && err.contains("not a GPT checkpoint")
            && err.contains("\"mlp\""),
        "{err}"
    );
    let out = camel(&[
        "generate",
        "--checkpoint",
        dir.0.join("absent").to_str().unwrap(),
    ]);
    let err = text(&out.stderr);
    assert!(
        err.contains("absent") && err.contains("config.json"),
        "{err}"
    );
}
