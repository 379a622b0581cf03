//! `camel train gpt` and `camel generate` (part of the `camel` program, not of the library).

use super::{at_least_one, check_device, positive, CliError, CliResult, Out};
use camel_models::data::{data_dir, CharTokenizer, TextData};
use camel_models::gpt::{GptConfig, GptMini};
use camel_models::run::{self, Metrics, RunDir};
use camel_models::train::{train_gpt as train_loop, GptTrainConfig, Precision};
use camel_nn::{load_safetensors, Device, Generator, Module};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// File name of the tokenizer inside a GPT run folder.
pub const TOKENIZER: &str = "tokenizer.json";

/// A named set of defaults for `camel train gpt`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// nanoGPT's Shakespeare-char recipe: 6 layers, 6 heads, 384 wide, block 256, batch 64,
    /// dropout 0.2, lr 1e-3 → 1e-4, warm-up 100, 5000 steps.
    ShakespeareChar,
}

/// Arguments of `camel train gpt`. Unset sizes take the preset's value, or the small model's
/// (4 layers, 4 heads, 128 wide, block 128, batch 64, no dropout).
#[derive(Args)]
pub struct GptArgs {
    /// Start from a named recipe; explicit flags override it.
    #[arg(long, value_enum)]
    preset: Option<Preset>,
    /// Number of transformer blocks (≥ 1).
    #[arg(long, allow_negative_numbers = true)]
    n_layer: Option<i64>,
    /// Attention heads per block (≥ 1, dividing --n-embd).
    #[arg(long, allow_negative_numbers = true)]
    n_head: Option<i64>,
    /// Width of the residual stream (≥ 1).
    #[arg(long, allow_negative_numbers = true)]
    n_embd: Option<i64>,
    /// Context length in characters (≥ 1).
    #[arg(long, allow_negative_numbers = true)]
    block_size: Option<i64>,
    /// Sequences per step (≥ 1).
    #[arg(long, allow_negative_numbers = true)]
    batch_size: Option<i64>,
    /// Dropout probability in [0, 1).
    #[arg(long, allow_negative_numbers = true)]
    dropout: Option<f64>,
    /// Peak learning rate (finite, > 0).
    #[arg(long, default_value_t = 1e-3, allow_negative_numbers = true)]
    lr: f64,
    /// Floor of the cosine decay (finite, in [0, --lr]).
    #[arg(long, default_value_t = 1e-4, allow_negative_numbers = true)]
    min_lr: f64,
    /// Steps of linear warm-up (≥ 0).
    #[arg(long, default_value_t = 100, allow_negative_numbers = true)]
    warmup: i64,
    /// Optimizer steps (≥ 1).
    #[arg(long, default_value_t = 5000, allow_negative_numbers = true)]
    iters: i64,
    /// Evaluate every this many steps (≥ 1).
    #[arg(long, default_value_t = 250, allow_negative_numbers = true)]
    eval_interval: i64,
    /// Batches averaged per evaluation of each split (≥ 1).
    #[arg(long, default_value_t = 200, allow_negative_numbers = true)]
    eval_iters: i64,
    /// AdamW weight decay on the matrices (finite, ≥ 0).
    #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
    weight_decay: f64,
    /// Clip the gradients' global norm to this (finite, ≥ 0; 0 turns clipping off).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    grad_clip: f64,
    /// AdamW's β₁ and β₂, each in [0, 1).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.9,0.99",
        allow_negative_numbers = true
    )]
    betas: Vec<f64>,
    /// Share the token embedding's matrix with the output layer.
    #[arg(long)]
    tie_weights: bool,
    /// Seed of the initialisation, the batches and dropout.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: Device,
    /// Precision of the matrix products: f32, or bf16 or f16 on f32 master weights (autocast);
    /// f16 scales the loss dynamically.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    precision: Precision,
    /// Folder holding the data sets (default: $CAMEL_DATA_DIR, else the checkout's datasets/).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Run folder to write (default: runs/gpt-TIME, TIME in UTC).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// `x` as a finite f32 in `[0, 1)`.
fn unit_interval(flag: &str, x: f64) -> CliResult<f32> {
    if (0.0..1.0).contains(&x) && (x as f32) < 1.0 {
        Ok(x as f32)
    } else {
        Err(CliError::Usage(format!(
            "{flag} must be in [0, 1), got {x}"
        )))
    }
}

/// `x` as a finite f32 that is at least 0.
fn non_negative(flag: &str, x: f64) -> CliResult<f32> {
    if x.is_finite() && x >= 0.0 && (x as f32).is_finite() {
        Ok(x as f32)
    } else {
        Err(CliError::Usage(format!(
            "{flag} must be finite and at least 0, got {x}"
        )))
    }
}

impl GptArgs {
    /// The checked configuration; `vocab_size` is 0 until the data is read.
    fn validate(&self) -> CliResult<GptTrainConfig> {
        let recipe = self.preset == Some(Preset::ShakespeareChar);
        let base = if recipe {
            GptConfig::shakespeare_char(0)
        } else {
            GptConfig::small(0)
        };
        let size = |flag: &str, v: Option<i64>, d: usize| match v {
            Some(n) => at_least_one(flag, n),
            None => Ok(d),
        };
        let n_layer = size("--n-layer", self.n_layer, base.n_layer)?;
        let n_head = size("--n-head", self.n_head, base.n_head)?;
        let n_embd = size("--n-embd", self.n_embd, base.n_embd)?;
        let block_size = size("--block-size", self.block_size, base.block_size)?;
        let batch_size = size("--batch-size", self.batch_size, 64)?;
        if !n_embd.is_multiple_of(n_head) {
            return Err(CliError::Usage(format!(
                "--n-embd ({n_embd}) must be divisible by --n-head ({n_head}): each head gets \
                 n_embd / n_head channels"
            )));
        }
        let dropout = match self.dropout {
            Some(p) => unit_interval("--dropout", p)?,
            None => base.dropout,
        };
        let lr = positive("--lr", self.lr)?;
        let min_lr = non_negative("--min-lr", self.min_lr)?;
        if min_lr > lr {
            return Err(CliError::Usage(format!(
                "--min-lr ({min_lr}) must not exceed --lr ({lr})"
            )));
        }
        let warmup = if self.warmup >= 0 {
            self.warmup as usize
        } else {
            return Err(CliError::Usage(format!(
                "--warmup must be at least 0, got {}",
                self.warmup
            )));
        };
        let iters = at_least_one("--iters", self.iters)?;
        let eval_interval = at_least_one("--eval-interval", self.eval_interval)?;
        let eval_iters = at_least_one("--eval-iters", self.eval_iters)?;
        let weight_decay = non_negative("--weight-decay", self.weight_decay)?;
        let grad_clip = non_negative("--grad-clip", self.grad_clip)?;
        let [b1, b2] = self.betas[..] else {
            return Err(CliError::Usage(format!(
                "--betas takes two numbers (β₁,β₂), got {}",
                self.betas.len()
            )));
        };
        let b1 = unit_interval("--betas (β₁)", b1)?;
        let b2 = unit_interval("--betas (β₂)", b2)?;
        check_device(self.device)?;
        Ok(GptTrainConfig {
            model: GptConfig {
                vocab_size: 0,
                block_size,
                n_layer,
                n_head,
                n_embd,
                dropout,
                bias: true,
                tie_weights: self.tie_weights,
                fused_attention: true,
            },
            batch_size,
            lr,
            min_lr,
            warmup,
            iters,
            eval_interval,
            eval_iters,
            weight_decay,
            grad_clip,
            betas: [b1, b2],
            seed: self.seed,
            precision: self.precision,
        })
    }
}

/// `camel train gpt`.
pub fn train_gpt(out: &Out, args: &GptArgs) -> CliResult<()> {
    let mut cfg = args.validate()?;
    let device = args.device;
    let run_path = args
        .out
        .clone()
        .unwrap_or_else(|| run::default_run_dir("gpt"));
    RunDir::check_new(&run_path).map_err(|e| CliError::Usage(e.to_string()))?;
    let t0 = std::time::Instant::now();
    let root = args.data_dir.clone().unwrap_or_else(data_dir);
    let data = TextData::shakespeare(&root)?;
    cfg.model.vocab_size = data.tokenizer.vocab_size();
    for (split, n) in [
        ("training", data.train.len()),
        ("validation", data.val.len()),
    ] {
        if n <= cfg.model.block_size {
            return Err(CliError::Run(camel_models::Error::Invalid(format!(
                "--block-size {}: the {split} split holds only {n} characters",
                cfg.model.block_size
            ))));
        }
    }
    camel_nn::manual_seed(cfg.seed);
    let model = GptMini::with_seed(&cfg.model, cfg.seed, device)?;
    let mut config = serde_json::to_value(&cfg).map_err(|e| CliError::Usage(e.to_string()))?;
    config["model_type"] = json!("gpt");
    config["device"] = json!(device.to_string());
    let argv: Vec<String> = std::env::args().collect();
    let mut record = RunDir::create(&run_path, &argv, &config)?;
    data.tokenizer.save(&run_path.join(TOKENIZER))?;
    let m = &cfg.model;
    out.info(
        &format!(
            "camel: GPT-mini {} layers, {} heads, {} wide, block {}, vocab {} ({:.2}M parameters) on \
             tinyshakespeare ({} train / {} val characters), device {device}, precision {}, batch {}, \
             lr {} → {}, {} steps, run folder {}",
            m.n_layer,
            m.n_head,
            m.n_embd,
            m.block_size,
            m.vocab_size,
            model.num_parameters() as f64 / 1e6,
            data.train.len(),
            data.val.len(),
            cfg.precision.name(),
            cfg.batch_size,
            cfg.lr,
            cfg.min_lr,
            cfg.iters,
            run_path.display()
        ),
        json!({"event": "start", "model": "gpt", "parameters": model.num_parameters(),
               "train": data.train.len(), "val": data.val.len(), "run": run_path,
               "config": config}),
    )?;
    // which attention runs, in training and in evaluation (and why, when it is the naive one)
    let probe = camel_nn::Tensor::zeros(&[1, 1, m.n_embd], device)?;
    let path = |training: bool| -> CliResult<String> {
        model.set_training(training);
        let p = match cfg.precision.autocast() {
            Some(d) => camel_nn::autocast(d, || model.attention_path(&probe))?,
            None => model.attention_path(&probe),
        };
        Ok(p.map_or_else(|| "none".to_string(), |p| p.to_string()))
    };
    let (train_path, eval_path) = (path(true)?, path(false)?);
    model.set_training(true);
    out.info(
        &format!("camel: attention in training: {train_path}; in evaluation: {eval_path}"),
        json!({"event": "attention", "training": train_path, "evaluation": eval_path}),
    )?;
    let meta = HashMap::from([
        ("model".to_string(), "gpt".to_string()),
        (
            "config".to_string(),
            serde_json::to_string(&cfg.model).unwrap_or_default(),
        ),
    ]);
    let bar = if out.quiet || out.json {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(cfg.eval_interval.min(cfg.iters) as u64);
        if let Ok(style) =
            ProgressStyle::with_template("step {prefix} [{bar:30}] {pos}/{len} ({elapsed})")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    };
    let mut best = f32::INFINITY;
    let mut out_err: Option<CliError> = None;
    let iters = cfg.iters;
    let interval = cfg.eval_interval;
    let trained = train_loop(
        &model,
        &data,
        &cfg,
        device,
        |iter| {
            bar.set_prefix(format!("{}", iter + 1));
            bar.inc(1);
        },
        |e| {
            bar.finish_and_clear();
            let improved = e.val_loss < best;
            if improved {
                best = e.val_loss;
                record.save_checkpoint(&model, meta.clone())?;
            }
            record.log(Metrics {
                step: e.iter,
                epoch: 0,
                train_loss: e.train_loss,
                test_loss: e.val_loss,
                test_acc: None,
                seconds: t0.elapsed().as_secs_f64(),
            })?;
            let shown = out.result(
                &format!(
                    "step {}/{iters}: train loss {:.4}  val loss {:.4}{}  lr {:.2e}  {:.1} ms/step{}",
                    e.iter,
                    e.train_loss,
                    e.val_loss,
                    if improved { " (best, saved)" } else { "" },
                    e.lr,
                    e.ms_per_step,
                    e.loss_scale.map_or(String::new(), |(s, k)| format!(
                        "  loss scale {s} ({k} steps skipped)"
                    ))
                ),
                json!({"event": "eval", "step": e.iter, "iters": iters, "train_loss": e.train_loss,
                       "val_loss": e.val_loss, "best": improved, "lr": e.lr,
                       "ms_per_step": e.ms_per_step, "seconds": t0.elapsed().as_secs_f64(),
                       "loss_scale": e.loss_scale.map(|(s, _)| s),
                       "skipped_steps": e.loss_scale.map(|(_, k)| k)}),
            );
            if let Err(err) = shown {
                out_err = Some(err);
                return Err(camel_models::Error::Invalid("output failed".into()));
            }
            if e.iter < iters {
                bar.reset();
                bar.set_length(interval.min(iters - e.iter) as u64);
            }
            Ok(())
        },
    );
    bar.finish_and_clear();
    if let Some(e) = out_err {
        return Err(e);
    }
    let best = trained?;
    out.info(
        &format!(
            "best val loss {best:.4}; run folder {} ({}, {TOKENIZER}, {}, {}, {})",
            run_path.display(),
            run::CHECKPOINT,
            run::METRICS,
            run::PLOT,
            run::CONFIG
        ),
        json!({"event": "done", "best_val_loss": best, "run": run_path,
               "seconds": t0.elapsed().as_secs_f64()}),
    )
}

/// Arguments of `camel generate`.
#[derive(Args)]
pub struct GenerateArgs {
    /// Run folder of `camel train gpt` (or its model.safetensors).
    #[arg(long)]
    checkpoint: PathBuf,
    /// Text to continue; every character must be in the checkpoint's vocabulary.
    #[arg(long, default_value = "\n")]
    prompt: String,
    /// Characters to generate.
    #[arg(long, default_value_t = 500, allow_negative_numbers = true)]
    tokens: i64,
    /// Sampling temperature (finite, ≥ 0; 0 takes the most likely character every time).
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
    temperature: f64,
    /// Sample among the K most likely characters only (≥ 1; default: all).
    #[arg(long, allow_negative_numbers = true)]
    top_k: Option<i64>,
    /// Context the model sees, in characters (≥ 1, at most the checkpoint's block size;
    /// default: the block size).
    #[arg(long, allow_negative_numbers = true)]
    block_size: Option<i64>,
    /// Seed of the sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: Device,
}

/// Reads a GPT run folder: its configuration, tokenizer and checkpoint, loaded into a model on
/// `device`. A folder of another model is an error naming its config.json.
pub fn load_gpt(dir: &Path, device: Device) -> camel_models::Result<(GptMini, CharTokenizer)> {
    let config = run::read_config(dir)?;
    let cfg_path = dir.join(run::CONFIG);
    if config["model_type"] != "gpt" {
        let found = match (&config["model_type"], &config["model"]) {
            (serde_json::Value::String(s), _) | (_, serde_json::Value::String(s)) => s.clone(),
            _ => "no model name".to_string(),
        };
        return Err(camel_models::Error::Invalid(format!(
            "{}: not a GPT checkpoint: the run is of model {found:?} (camel generate needs a run \
             folder of `camel train gpt`)",
            cfg_path.display()
        )));
    }
    let gpt: GptConfig = serde_json::from_value(config["model"].clone()).map_err(|e| {
        camel_models::Error::Invalid(format!("{}: \"model\": {e}", cfg_path.display()))
    })?;
    let tokenizer = CharTokenizer::load(&dir.join(TOKENIZER))?;
    if tokenizer.vocab_size() != gpt.vocab_size {
        return Err(camel_models::Error::Invalid(format!(
            "{}: {} characters, but the model's vocabulary has {}",
            dir.join(TOKENIZER).display(),
            tokenizer.vocab_size(),
            gpt.vocab_size
        )));
    }
    let model = GptMini::with_seed(&gpt, 0, device)?;
    let (state, _) = load_safetensors(&dir.join(run::CHECKPOINT), device)?;
    model.load_state_dict(&state)?;
    Ok((model, tokenizer))
}

/// `camel generate`.
pub fn generate(out: &Out, args: &GenerateArgs) -> CliResult<()> {
    let tokens = if args.tokens >= 0 {
        args.tokens as usize
    } else {
        return Err(CliError::Usage(format!(
            "--tokens must be at least 0, got {}",
            args.tokens
        )));
    };
    let temperature = non_negative("--temperature", args.temperature)?;
    let top_k = match args.top_k {
        Some(k) if k < 1 => {
            return Err(CliError::Usage(format!(
                "--top-k must be at least 1 (leave it out to sample among every character), got {k}"
            )))
        }
        k => k.map(|k| k as usize),
    };
    let context = args
        .block_size
        .map(|b| at_least_one("--block-size", b))
        .transpose()?;
    check_device(args.device)?;
    let dir = if args.checkpoint.is_file() {
        args.checkpoint
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    } else {
        args.checkpoint.clone()
    };
    let (model, tokenizer) = load_gpt(&dir, args.device)?;
    let block = model.config().block_size;
    let context = context.unwrap_or(block);
    if context > block {
        return Err(CliError::Usage(format!(
            "--block-size {context} is larger than the checkpoint's block size {block} (the \
             model has learned positions 0..{block} only)"
        )));
    }
    if args.prompt.is_empty() {
        return Err(CliError::Usage(
            "--prompt is empty; give at least one character".into(),
        ));
    }
    let prompt = tokenizer
        .encode(&args.prompt)
        .map_err(|e| CliError::Usage(format!("--prompt: {e}")))?;
    let mut g = Generator::new(args.seed);
    let t0 = std::time::Instant::now();
    let ids = model.generate_in(&prompt, tokens, temperature, top_k, context, &mut g)?;
    let secs = t0.elapsed().as_secs_f64();
    let text = tokenizer.decode(&ids).map_err(camel_models::Error::from)?;
    out.result(
        &text,
        json!({"event": "sample", "text": text, "prompt": args.prompt, "tokens": tokens,
               "temperature": temperature, "top_k": top_k, "seed": args.seed,
               "seconds": secs}),
    )
}
