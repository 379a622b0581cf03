//! `camel`: train the models of camel from the command line.
//!
//! ```text
//! camel train mlp --data mnist --epochs 5 --batch-size 64 --lr 1e-3 --seed 0 [--device cuda]
//! camel train lenet --data mnist --epochs 8 [--device cuda]
//! camel train cnn --data fashion-mnist --epochs 10 [--device cuda]
//! camel train cnn --data cifar-10 --epochs 20 --augment [--device cuda]
//! camel eval --checkpoint runs/mlp-…
//! camel train gpt --preset shakespeare-char --device cuda --out runs/shakespeare
//! camel generate --checkpoint runs/shakespeare --prompt "ROMEO:" --tokens 500 --seed 1
//! ```
//!
//! The image classifiers (mlp, lenet, cnn) train on MNIST, Fashion-MNIST (1×28×28) or CIFAR-10
//! (3×32×32; LeNet-5 takes 28×28 grey images only), `--augment` cropping and flipping their
//! training batches. Every argument is checked before any data is read; `--quiet` and `--json`
//! work on every subcommand; a closed pipe on stdout ends the program quietly.

use camel_models::data::{data_dir, DataLoader, ImageSet, Split, IMAGE_SETS};
use camel_models::regression::{Regression, RegressionConfig};
use camel_models::run::{self, Metrics, RunDir};
use camel_models::train::{epoch_augment, evaluate, train_epoch_augmented, Precision};
use camel_models::{LeNet5, Mlp, SimpleCnn, SimpleCnnConfig};
use camel_nn::{load_safetensors, Device, Module, Tensor};
use camel_optim::{Adam, Optimizer, Sgd};
use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod gpt_cli;
use gpt_cli::{GenerateArgs, GptArgs};

#[derive(Parser)]
#[command(
    name = "camel",
    version,
    about = "Train small models with camel's own kernels"
)]
struct Cli {
    /// Print results only: no progress bars, no informational lines.
    #[arg(long, global = true)]
    quiet: bool,
    /// Print machine-readable output: one JSON object per line on stdout.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Train a model; the run leaves a folder (see --out).
    Train {
        #[command(subcommand)]
        model: Model,
    },
    /// List, fetch or verify the data sets.
    Data {
        #[command(subcommand)]
        cmd: DataCmd,
    },
    /// Write text with a GPT checkpoint (a run folder of `camel train gpt`).
    Generate(GenerateArgs),
    /// Redraw a run folder's plot from its metrics.jsonl.
    Plot {
        /// Run folder written by `camel train`.
        run: PathBuf,
        /// Horizontal axis: the optimizer step or the epoch (default: the epoch when every
        /// record ends a different one).
        #[arg(long, value_enum)]
        x: Option<XAxis>,
        /// PNG to write (default: plot.png in the run folder).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Re-evaluate a saved classifier (mlp, lenet, cnn) on its test set.
    Eval {
        /// Run folder written by `camel train` (holding config.json and model.safetensors).
        #[arg(long)]
        checkpoint: PathBuf,
        /// cpu, cuda or cuda:N.
        #[arg(long, default_value = "cpu")]
        device: Device,
    },
}

/// The horizontal axis of `camel plot`.
#[derive(Clone, Copy, ValueEnum)]
enum XAxis {
    Step,
    Epoch,
}

#[derive(Subcommand)]
enum DataCmd {
    /// List the known data sets, where each lives and whether it is present.
    List {
        /// Folder holding the data sets (default: $CAMEL_DATA_DIR, else the checkout's datasets/).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Download a data set; each file is kept only once its SHA-256 matches.
    Fetch {
        /// Data set name (see `camel data list`).
        name: String,
        /// Folder holding the data sets (default: $CAMEL_DATA_DIR, else the checkout's datasets/).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Download from this base URL only (file URL = base + file name), not the set's list.
        #[arg(long)]
        from: Option<String>,
    },
    /// Re-check the SHA-256 of the files on disk (every present set, or NAME).
    Verify {
        /// Data set name; default: every set that is present.
        name: Option<String>,
        /// Folder holding the data sets (default: $CAMEL_DATA_DIR, else the checkout's datasets/).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Opt {
    Adam,
    Adamw,
    Sgd,
}

#[derive(Subcommand)]
enum Model {
    /// A multi-layer perceptron on the images of --data (784-256-256-10 on MNIST by default,
    /// 3072-256-256-10 on CIFAR-10).
    Mlp(MlpArgs),
    /// LeNet-5 on MNIST-style 28×28 grey images (conv 6 and 16 channels, then 120-84-10).
    Lenet(ClassifierArgs),
    /// A small CNN with BatchNorm on the images of --data, grey 28×28 or CIFAR-10's colour 32×32
    /// (Conv-BatchNorm-ReLU-MaxPool blocks of 32 and 64 channels, then 128-10).
    Cnn(ClassifierArgs),
    /// A linear model (or an MLP with --hidden) fitted with MSE to one column of a TSV/CSV table.
    Regression(RegressionArgs),
    /// A character-level GPT on Tiny Shakespeare (4 layers, 4 heads, 128 wide, block 128 by
    /// default; --preset shakespeare-char for nanoGPT's recipe).
    Gpt(GptArgs),
}

/// Arguments of `camel train regression`, as parsed (checked by [`RegressionArgs::validate`]).
#[derive(Args)]
struct RegressionArgs {
    /// TSV or CSV file with a header row (e.g. datasets/sales-example.tsv).
    #[arg(long)]
    data: PathBuf,
    /// Column to predict.
    #[arg(long)]
    target: String,
    /// Feature columns, comma-separated (default: every other column).
    #[arg(long, value_delimiter = ',')]
    features: Option<Vec<String>>,
    /// Hidden layer widths, comma-separated; none for a linear model.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    hidden: Vec<i64>,
    /// Number of passes over the training rows (≥ 1).
    #[arg(long, default_value_t = 150, allow_negative_numbers = true)]
    epochs: i64,
    /// Rows per optimizer step (≥ 1).
    #[arg(long, default_value_t = 32, allow_negative_numbers = true)]
    batch_size: i64,
    /// Adam's learning rate (finite, > 0).
    #[arg(long, default_value_t = 1e-2, allow_negative_numbers = true)]
    lr: f64,
    /// Seed of the split, the initialization and the batch order.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Share of rows held out for testing, in (0, 1).
    #[arg(long, default_value_t = 0.2, allow_negative_numbers = true)]
    test_fraction: f64,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: Device,
    /// Run folder to write (default: runs/regression-TIME, TIME in UTC).
    #[arg(long)]
    out: Option<PathBuf>,
}

impl RegressionArgs {
    fn validate(&self) -> CliResult<RegressionConfig> {
        let epochs = at_least_one("--epochs", self.epochs)?;
        let batch_size = at_least_one("--batch-size", self.batch_size)?;
        let lr = positive("--lr", self.lr)?;
        let hidden = self
            .hidden
            .iter()
            .map(|&h| at_least_one("--hidden (each width)", h))
            .collect::<CliResult<Vec<_>>>()?;
        if !(self.test_fraction > 0.0 && self.test_fraction < 1.0) {
            return Err(CliError::Usage(format!(
                "--test-fraction must be in (0, 1), got {}",
                self.test_fraction
            )));
        }
        if let Some(f) = &self.features {
            if f.iter().any(|c| c.is_empty()) || f.contains(&self.target) {
                return Err(CliError::Usage(format!(
                    "--features must name columns other than the target {:?}, got {f:?}",
                    self.target
                )));
            }
        }
        check_device(self.device)?;
        Ok(RegressionConfig {
            data: self.data.clone(),
            target: self.target.clone(),
            features: self.features.clone(),
            hidden,
            epochs,
            batch_size,
            lr,
            seed: self.seed,
            test_fraction: self.test_fraction,
        })
    }
}

/// Arguments of `camel train mlp`: those of every image classifier, and the hidden widths.
#[derive(Args)]
struct MlpArgs {
    #[command(flatten)]
    common: ClassifierArgs,
    /// Hidden layer widths, comma-separated (each ≥ 1).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "256,256",
        allow_negative_numbers = true
    )]
    hidden: Vec<i64>,
}

/// Arguments of `camel train mlp|lenet|cnn`, as parsed. Numbers are parsed wide and signed so
/// that a bad value reaches [`ClassifierArgs::validate`] and gets a message saying what is
/// expected.
#[derive(Args)]
struct ClassifierArgs {
    /// Data set: mnist, fashion-mnist (1×28×28) or cifar-10 (alias cifar10; 3×32×32).
    #[arg(long, default_value = "mnist")]
    data: String,
    /// Folder holding the data sets (default: $CAMEL_DATA_DIR, else the checkout's datasets/).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Number of passes over the training set (≥ 1).
    #[arg(long, default_value_t = 5, allow_negative_numbers = true)]
    epochs: i64,
    /// Images per optimizer step (≥ 1).
    #[arg(long, default_value_t = 64, allow_negative_numbers = true)]
    batch_size: i64,
    /// Learning rate (finite, > 0).
    #[arg(long, default_value_t = 1e-3, allow_negative_numbers = true)]
    lr: f64,
    /// Adam's β₁ and β₂, each in [0, 1).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.9,0.999",
        allow_negative_numbers = true
    )]
    betas: Vec<f64>,
    /// Weight decay (finite, ≥ 0; default 0.01 for adamw, else 0).
    #[arg(long, allow_negative_numbers = true)]
    weight_decay: Option<f64>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: Device,
    #[arg(long, value_enum, default_value_t = Opt::Adam)]
    optimizer: Opt,
    /// Train on the first N training images only (≥ 1).
    #[arg(long, allow_negative_numbers = true)]
    subset: Option<i64>,
    /// Augment the training batches (never the test set): a random crop of each image padded by
    /// 4 pixels, and a horizontal flip with probability ½, seeded from --seed and the epoch.
    #[arg(long)]
    augment: bool,
    /// Precision of the matrix products and convolutions: f32, or bf16 or f16 on f32 master
    /// weights (autocast); f16 scales the loss dynamically.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    precision: Precision,
    /// Run folder to write (default: runs/MODEL-TIME, TIME in UTC).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// A validated `camel train mlp|lenet|cnn` configuration; written to the run folder's
/// config.json.
#[derive(serde::Serialize)]
struct ClassifierConfig {
    model: &'static str,
    /// The data set's canonical name (`cifar-10` for `--data cifar10`).
    data: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data_dir: Option<PathBuf>,
    epochs: usize,
    batch_size: usize,
    lr: f32,
    betas: [f32; 2],
    weight_decay: f32,
    seed: u64,
    device: String,
    /// The MLP's hidden widths (none for the other models).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    hidden: Vec<usize>,
    optimizer: Opt,
    #[serde(skip_serializing_if = "Option::is_none")]
    subset: Option<usize>,
    /// Whether the training batches are augmented (`--augment`).
    augment: bool,
    /// Precision of the matrix products (`--precision`).
    precision: Precision,
}

/// Why the program stopped early.
enum CliError {
    /// A bad argument, found before any work.
    Usage(String),
    /// A failure while working.
    Run(camel_models::Error),
    /// stdout was closed by the reader (`camel … | head -1`).
    BrokenPipe,
}

impl From<camel_models::Error> for CliError {
    fn from(e: camel_models::Error) -> Self {
        CliError::Run(e)
    }
}

impl From<camel_nn::Error> for CliError {
    fn from(e: camel_nn::Error) -> Self {
        CliError::Run(e.into())
    }
}

type CliResult<T> = std::result::Result<T, CliError>;

/// `n` as a count that must be at least 1.
fn at_least_one(flag: &str, n: i64) -> CliResult<usize> {
    if n >= 1 {
        Ok(n as usize)
    } else {
        Err(CliError::Usage(format!(
            "{flag} must be at least 1, got {n}"
        )))
    }
}

/// `x` as a finite positive f32.
fn positive(flag: &str, x: f64) -> CliResult<f32> {
    if x.is_finite() && x > 0.0 && (x as f32) > 0.0 && (x as f32).is_finite() {
        Ok(x as f32)
    } else {
        Err(CliError::Usage(format!(
            "{flag} must be finite and greater than 0, got {x}"
        )))
    }
}

/// Checks that `device` answers (a one-element allocation), so a missing GPU is reported
/// before the data is read.
fn check_device(device: Device) -> CliResult<()> {
    Tensor::zeros(&[1], device)
        .map(|_| ())
        .map_err(|e| CliError::Usage(format!("--device {device}: {e}")))
}

impl MlpArgs {
    fn validate(&self) -> CliResult<ClassifierConfig> {
        let hidden = self
            .hidden
            .iter()
            .map(|&h| at_least_one("--hidden (each width)", h))
            .collect::<CliResult<Vec<_>>>()?;
        self.common.validate("mlp", hidden)
    }
}

impl ClassifierArgs {
    /// The configuration of training `model` (`mlp` with its `hidden` widths, `lenet`, `cnn`).
    fn validate(&self, model: &'static str, hidden: Vec<usize>) -> CliResult<ClassifierConfig> {
        let Some(data) = ImageSet::canonical(&self.data) else {
            return Err(CliError::Usage(format!(
                "--data must be one of {} (or cifar10), got {:?}",
                IMAGE_SETS.join(", "),
                self.data
            )));
        };
        let [c, h, w] = ImageSet::image_shape(data).unwrap_or([1, 28, 28]);
        if model == "lenet" && [c, h, w] != [1, 28, 28] {
            return Err(CliError::Usage(format!(
                "--data {data}: LeNet-5 takes 28×28 single-channel images (mnist, \
                 fashion-mnist), and {data}'s are {c}×{h}×{w}; train cnn or mlp on it"
            )));
        }
        let epochs = at_least_one("--epochs", self.epochs)?;
        let batch_size = at_least_one("--batch-size", self.batch_size)?;
        let lr = positive("--lr", self.lr)?;
        let [b1, b2] = self.betas[..] else {
            return Err(CliError::Usage(format!(
                "--betas takes two numbers (β₁,β₂), got {}",
                self.betas.len()
            )));
        };
        for (name, b) in [("β₁", b1), ("β₂", b2)] {
            if !(0.0..1.0).contains(&b) {
                return Err(CliError::Usage(format!(
                    "--betas: {name} must be in [0, 1), got {b}"
                )));
            }
        }
        let weight_decay = match (self.weight_decay, self.optimizer) {
            (Some(w), _) if !(w.is_finite() && w >= 0.0) => {
                return Err(CliError::Usage(format!(
                    "--weight-decay must be finite and at least 0, got {w}"
                )))
            }
            (Some(w), _) => w as f32,
            (None, Opt::Adamw) => 0.01,
            (None, _) => 0.0,
        };
        let subset = self
            .subset
            .map(|n| at_least_one("--subset", n))
            .transpose()?;
        check_device(self.device)?;
        Ok(ClassifierConfig {
            model,
            data,
            data_dir: self.data_dir.clone(),
            epochs,
            batch_size,
            lr,
            betas: [b1 as f32, b2 as f32],
            weight_decay,
            seed: self.seed,
            device: self.device.to_string(),
            hidden,
            optimizer: self.optimizer,
            subset,
            augment: self.augment,
            precision: self.precision,
        })
    }
}

/// Where results go: text or JSON lines on stdout, informational lines hidden by `--quiet`.
struct Out {
    quiet: bool,
    json: bool,
}

impl Out {
    fn line(&self, text: &str) -> CliResult<()> {
        let mut so = std::io::stdout().lock();
        writeln!(so, "{text}")
            .and_then(|_| so.flush())
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::BrokenPipe => CliError::BrokenPipe,
                _ => CliError::Run(camel_models::Error::Io {
                    path: PathBuf::from("<stdout>"),
                    source: e,
                }),
            })
    }

    /// A result line: always printed.
    fn result(&self, text: &str, value: serde_json::Value) -> CliResult<()> {
        if self.json {
            self.line(&value.to_string())
        } else {
            self.line(text)
        }
    }

    /// An informational line: hidden by `--quiet`.
    fn info(&self, text: &str, value: serde_json::Value) -> CliResult<()> {
        if self.quiet {
            Ok(())
        } else {
            self.result(text, value)
        }
    }

    fn progress(&self, len: u64, prefix: String) -> ProgressBar {
        if self.quiet || self.json {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new(len);
        if let Ok(style) =
            ProgressStyle::with_template("epoch {prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(prefix);
        bar
    }
}

/// Parses the command line. Under `--json` a usage error is one JSON line on stderr (exit 2),
/// like every other error; `--help` and `--version` print as text either way.
fn parse_cli() -> std::result::Result<Cli, ExitCode> {
    use clap::error::ErrorKind;
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e) => {
            let json = std::env::args()
                .skip(1)
                .take_while(|a| a != "--")
                .any(|a| a == "--json");
            let plain = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
            if !json || plain {
                e.exit();
            }
            let msg = e.render().to_string();
            let msg = msg.trim().trim_start_matches("error: ");
            eprintln!(
                "{}",
                json!({ "event": "error", "kind": "usage", "message": msg })
            );
            Err(ExitCode::from(2))
        }
    }
}

fn main() -> ExitCode {
    let cli = match parse_cli() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let out = Out {
        quiet: cli.quiet,
        json: cli.json,
    };
    let result = match cli.cmd {
        Cmd::Train {
            model: Model::Mlp(args),
        } => args
            .validate()
            .and_then(|cfg| train_classifier(&out, &cfg, &args.common)),
        Cmd::Train {
            model: Model::Lenet(args),
        } => args
            .validate("lenet", vec![])
            .and_then(|cfg| train_classifier(&out, &cfg, &args)),
        Cmd::Train {
            model: Model::Cnn(args),
        } => args
            .validate("cnn", vec![])
            .and_then(|cfg| train_classifier(&out, &cfg, &args)),
        Cmd::Train {
            model: Model::Regression(args),
        } => train_regression(&out, &args),
        Cmd::Train {
            model: Model::Gpt(args),
        } => gpt_cli::train_gpt(&out, &args),
        Cmd::Generate(args) => gpt_cli::generate(&out, &args),
        Cmd::Eval { checkpoint, device } => eval(&out, &checkpoint, device),
        Cmd::Plot { run, x, out: png } => plot(&out, &run, x, png),
        Cmd::Data { cmd } => data_cmd(&out, cmd),
    };
    let (msg, code) = match result {
        Ok(()) | Err(CliError::BrokenPipe) => return ExitCode::SUCCESS,
        Err(CliError::Usage(m)) => (m, 2),
        Err(CliError::Run(e)) => (e.to_string(), 1),
    };
    if out.json {
        eprintln!("{}", json!({ "event": "error", "message": msg }));
    } else {
        eprintln!("error: {msg}");
    }
    ExitCode::from(code)
}

/// A classifier built from its name, with what the run says about it.
struct Built {
    model: Box<dyn Module>,
    /// Its description on the start line (`MLP [784, 256, 10]`, `LeNet-5` ...).
    label: String,
    /// The checkpoint's metadata: the model's name (and an MLP's sizes).
    meta: HashMap<String, String>,
}

/// The classifier `model` names (`mlp` with `hidden` widths, `lenet`, `cnn`) for the images of
/// `split`, initialized from `seed`.
fn build_model(
    model: &str,
    hidden: &[usize],
    split: &Split,
    seed: u64,
    device: Device,
) -> camel_models::Result<Built> {
    let mut meta = HashMap::from([("model".to_string(), model.to_string())]);
    let [channels, rows, cols] = split.image_shape();
    let built: (Box<dyn Module>, String) = match model {
        "mlp" => {
            let mut sizes = vec![split.image_len()];
            sizes.extend(hidden);
            sizes.push(10);
            meta.insert(
                "sizes".to_string(),
                serde_json::to_string(&sizes).unwrap_or_default(),
            );
            (
                Box::new(Mlp::new(&sizes, seed, device)?),
                format!("MLP {sizes:?}"),
            )
        }
        "lenet" if [channels, rows, cols] != [1, 28, 28] => {
            return Err(camel_models::Error::Invalid(format!(
                "LeNet-5 takes 28×28 single-channel images, not {channels}×{rows}×{cols}"
            )))
        }
        "lenet" => (Box::new(LeNet5::new(10, seed, device)?), "LeNet-5".into()),
        "cnn" if rows != cols => {
            return Err(camel_models::Error::Invalid(format!(
                "the CNN takes square images, not {rows}×{cols}"
            )))
        }
        "cnn" => {
            let c = SimpleCnnConfig {
                in_channels: channels,
                image_size: rows,
                ..SimpleCnnConfig::default()
            };
            let label = format!("SimpleCnn (blocks of {:?} channels)", c.channels);
            (Box::new(SimpleCnn::new(&c, seed, device)?), label)
        }
        other => {
            return Err(camel_models::Error::Invalid(format!(
                "model {other:?} is not a classifier camel knows (expected mlp, lenet or cnn)"
            )))
        }
    };
    Ok(Built {
        model: built.0,
        label: built.1,
        meta,
    })
}

/// `camel train mlp|lenet|cnn`: trains the classifier `cfg` describes on an image set,
/// evaluating and checkpointing after every epoch; with `--augment`, each epoch's training
/// batches are cropped and flipped by [`epoch_augment`].
fn train_classifier(out: &Out, cfg: &ClassifierConfig, args: &ClassifierArgs) -> CliResult<()> {
    let device = args.device;
    let dir = cfg.data_dir.clone().unwrap_or_else(data_dir);
    let run_path = args
        .out
        .clone()
        .unwrap_or_else(|| run::default_run_dir(cfg.model));
    let config = serde_json::to_value(cfg).map_err(|e| CliError::Usage(e.to_string()))?;
    RunDir::check_new(&run_path).map_err(|e| CliError::Usage(e.to_string()))?;
    let t0 = std::time::Instant::now();
    let mut ds = ImageSet::load(&dir, cfg.data).map_err(camel_models::Error::from)?;
    if let Some(n) = cfg.subset {
        ds.train = ds.train.subset(n);
    }
    let Built { model, label, meta } =
        build_model(cfg.model, &cfg.hidden, &ds.train, cfg.seed, device)?;
    let model = model.as_ref();
    let argv: Vec<String> = std::env::args().collect();
    let mut record = RunDir::create(&run_path, &argv, &config)?;
    out.info(
        &format!(
            "camel: {label} ({} parameters) on {} ({} images, {} train / {} test, loaded in {:.1}s), device {device}, precision {}, batch {}, lr {}{}, run folder {}",
            model.num_parameters(),
            cfg.data,
            ds.train.image_shape().map(|d| d.to_string()).join("×"),
            ds.train.n,
            ds.test.n,
            t0.elapsed().as_secs_f64(),
            cfg.precision.name(),
            cfg.batch_size,
            cfg.lr,
            if cfg.augment { ", augmented" } else { "" },
            run_path.display()
        ),
        json!({"event": "start", "model": cfg.model, "sizes": meta.get("sizes").and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok()), "parameters": model.num_parameters(),
               "train": ds.train.n, "test": ds.test.n, "run": run_path, "config": config}),
    )?;
    let params = model.parameters();
    let [b1, b2] = cfg.betas;
    let mut opt: Box<dyn Optimizer> = match cfg.optimizer {
        Opt::Adam => Box::new(
            Adam::new(params, cfg.lr)?
                .betas(b1, b2)?
                .weight_decay(cfg.weight_decay)?,
        ),
        Opt::Adamw => Box::new(Adam::adamw(params, cfg.lr, cfg.weight_decay)?.betas(b1, b2)?),
        Opt::Sgd => Box::new(
            Sgd::new(params, cfg.lr)?
                .momentum(0.9)?
                .weight_decay(cfg.weight_decay)?,
        ),
    };
    let loader = DataLoader::new(ds.train.n, cfg.batch_size)
        .map_err(camel_models::Error::from)?
        .shuffle(Some(cfg.seed));
    // training and evaluation in the run's precision (f32 master weights in every mode)
    let _precision = camel_nn::autocast_guard(cfg.precision.autocast())?;
    let mut scaler = cfg.precision.loss_scaler(device)?;
    let epochs = cfg.epochs;
    let mut step = 0usize;
    let mut best = f32::NEG_INFINITY;
    for epoch in 1..=epochs {
        let bar = out.progress(loader.num_batches() as u64, format!("{epoch}/{epochs}"));
        let mut augment = cfg.augment.then(|| epoch_augment(cfg.seed, epoch as u64));
        let (train_loss, steps, secs) = train_epoch_augmented(
            model,
            opt.as_mut(),
            scaler.as_mut(),
            &ds.train,
            &loader,
            epoch as u64,
            device,
            50,
            augment.as_mut(),
            |s, _, l| {
                bar.set_position(s as u64);
                bar.set_message(format!("loss {l:.4}"));
            },
        )?;
        bar.finish_and_clear();
        step += steps;
        let (test_loss, test_acc) = evaluate(model, &ds.test, 1000, device)?;
        let m = Metrics {
            step,
            epoch,
            train_loss,
            test_loss,
            test_acc: Some(test_acc),
            seconds: t0.elapsed().as_secs_f64(),
        };
        if test_acc > best {
            best = test_acc;
            record.save_checkpoint(model, meta.clone())?;
        }
        record.log(m.clone())?;
        out.result(
            &format!(
                "epoch {epoch}/{epochs}: train loss {train_loss:.4}  test loss {test_loss:.4}  test acc {:.2}%  time {secs:.2}s ({:.3} ms/step)",
                test_acc * 100.0,
                secs * 1e3 / steps.max(1) as f64
            ),
            json!({"event": "epoch", "step": step, "epoch": epoch, "epochs": epochs, "train_loss": train_loss,
                   "test_loss": test_loss, "test_acc": test_acc, "seconds": secs,
                   "ms_per_step": secs * 1e3 / steps.max(1) as f64}),
        )?;
    }
    if let Some(s) = &scaler {
        let (scale, skipped) = (s.scale_value()?, s.skipped_steps()?);
        out.info(
            &format!("loss scale {scale} ({skipped} of {step} steps skipped on an overflow)"),
            json!({"event": "loss_scale", "loss_scale": scale, "skipped_steps": skipped, "steps": step}),
        )?;
    }
    out.info(
        &format!(
            "best test acc {:.2}%; run folder {} ({}, {}, {}, {})",
            best * 100.0,
            run_path.display(),
            run::CHECKPOINT,
            run::METRICS,
            run::PLOT,
            run::CONFIG
        ),
        json!({"event": "done", "best_test_acc": best, "run": run_path}),
    )
}

/// `camel plot`: the run's metrics drawn again, over the axis asked for.
fn plot(out: &Out, dir: &Path, x: Option<XAxis>, png: Option<PathBuf>) -> CliResult<()> {
    let history = run::read_metrics(dir)?;
    if history.is_empty() {
        return Err(CliError::Run(camel_models::Error::Invalid(format!(
            "{}: no records to plot",
            dir.join(run::METRICS).display()
        ))));
    }
    let png = png.unwrap_or_else(|| dir.join(run::PLOT));
    match x {
        None => camel_models::plot::plot_metrics(&history, &png)?,
        Some(x) => camel_models::plot::plot_metrics_over(&history, matches!(x, XAxis::Step), &png)?,
    }
    out.result(
        &format!("wrote {}", png.display()),
        json!({"event": "plot", "path": png.display().to_string(), "records": history.len()}),
    )
}

/// `camel eval`: rebuilds the model a run folder describes (for the image shape of the data set
/// its config names), loads its checkpoint and evaluates it on the test split of that set.
fn eval(out: &Out, dir: &Path, device: Device) -> CliResult<()> {
    check_device(device)?;
    let bad = |what: &str| {
        CliError::Run(camel_models::Error::Invalid(format!(
            "{}: {what}",
            dir.join(run::CONFIG).display()
        )))
    };
    let config = run::read_config(dir)?;
    let model_name = match config["model"].as_str() {
        Some(m @ ("mlp" | "lenet" | "cnn")) => m.to_string(),
        _ => return Err(bad(
            "model is not a classifier camel eval knows (expected \"mlp\", \"lenet\" or \"cnn\")",
        )),
    };
    let data = config["data"]
        .as_str()
        .ok_or_else(|| bad("no \"data\" entry"))?
        .to_string();
    let hidden: Vec<usize> = match &config["hidden"] {
        serde_json::Value::Null => Vec::new(),
        h => serde_json::from_value(h.clone())
            .map_err(|_| bad("\"hidden\" is not a list of widths"))?,
    };
    let data_root = config["data_dir"]
        .as_str()
        .map(PathBuf::from)
        .unwrap_or_else(data_dir);
    let ds = ImageSet::load(&data_root, &data).map_err(camel_models::Error::from)?;
    let model = build_model(&model_name, &hidden, &ds.test, 0, device)?.model;
    let (state, _) =
        load_safetensors(&dir.join(run::CHECKPOINT), device).map_err(camel_models::Error::from)?;
    model
        .load_state_dict(&state)
        .map_err(camel_models::Error::from)?;
    // the run's precision (absent from older run folders: f32), so eval reproduces its figures
    let precision: Precision = match &config["precision"] {
        serde_json::Value::Null => Precision::F32,
        p => serde_json::from_value(p.clone())
            .map_err(|_| bad("\"precision\" is not one of \"f32\", \"bf16\", \"f16\""))?,
    };
    let _precision = camel_nn::autocast_guard(precision.autocast())?;
    let (test_loss, test_acc) = evaluate(model.as_ref(), &ds.test, 1000, device)?;
    out.result(
        &format!(
            "eval {}: {data} test loss {test_loss:.4}  test acc {:.2}%  ({} images)",
            dir.display(),
            test_acc * 100.0,
            ds.test.n
        ),
        json!({"event": "eval", "checkpoint": dir, "data": data, "test_loss": test_loss,
               "test_acc": test_acc, "n": ds.test.n}),
    )
}

/// Name of the scaling file a regression run writes beside its checkpoint.
const SCALING: &str = "standardize.json";

fn train_regression(out: &Out, args: &RegressionArgs) -> CliResult<()> {
    let cfg = args.validate()?;
    let run_path = args
        .out
        .clone()
        .unwrap_or_else(|| run::default_run_dir("regression"));
    RunDir::check_new(&run_path).map_err(|e| CliError::Usage(e.to_string()))?;
    let mut config = serde_json::to_value(&cfg).map_err(|e| CliError::Usage(e.to_string()))?;
    config["model"] = json!("regression");
    config["device"] = json!(args.device.to_string());
    let argv: Vec<String> = std::env::args().collect();
    let mut record: Option<RunDir> = None;
    let mut best = f32::INFINITY;
    let every = (cfg.epochs / 10).max(1);
    let mut out_err: Option<CliError> = None;
    let fitted = Regression::fit(&cfg, args.device, |m, reg| {
        let rec = match &mut record {
            Some(r) => r,
            None => {
                // created once the table has loaded, so a bad file leaves no folder behind
                let r = RunDir::create(&run_path, &argv, &config)?;
                let scaling = json!({"features": reg.x_scale, "target": reg.y_scale});
                let path = run_path.join(SCALING);
                std::fs::write(&path, format!("{scaling:#}\n"))
                    .map_err(|source| camel_models::Error::Io { path, source })?;
                record.insert(r)
            }
        };
        if m.test_loss < best {
            best = m.test_loss;
            rec.save_checkpoint(
                &reg.model,
                HashMap::from([("model".to_string(), "regression".to_string())]),
            )?;
        }
        rec.log(m.clone())?;
        if m.epoch % every == 0 || m.epoch == cfg.epochs {
            let shown = out.info(
                &format!(
                    "epoch {}/{}: train loss {:.4}  test loss {:.4} (MSE of the standardized target)",
                    m.epoch, cfg.epochs, m.train_loss, m.test_loss
                ),
                json!({"event": "epoch", "step": m.step, "epoch": m.epoch, "epochs": cfg.epochs,
                       "train_loss": m.train_loss, "test_loss": m.test_loss, "seconds": m.seconds}),
            );
            if let Err(e) = shown {
                // stop training; the CLI error (a closed pipe, say) is returned after `fit`
                out_err = Some(e);
                return Err(camel_models::Error::Invalid("output failed".into()));
            }
        }
        Ok(())
    });
    let (reg, score) = match (fitted, out_err) {
        (_, Some(e)) => return Err(e),
        (r, None) => r?,
    };
    let coef = reg.linear_coefficients()?;
    let formula = coef.as_ref().map(|(b, c)| {
        let terms: String = c
            .iter()
            .zip(&reg.x_scale.names)
            .map(|(c, n)| format!(" {} {:.4}·{n}", if *c < 0.0 { '-' } else { '+' }, c.abs()))
            .collect();
        format!("{} ≈ {b:.4}{terms}", cfg.target)
    });
    out.result(
        &format!(
            "held-out: RMSE {:.4}  R² {:.4}  ({} test rows, {} train rows){}",
            score.rmse,
            score.r2,
            score.n_test,
            score.n_train,
            formula.as_ref().map(|f| format!("\n{f}")).unwrap_or_default()
        ),
        json!({"event": "done", "rmse": score.rmse, "r2": score.r2, "n_test": score.n_test,
               "n_train": score.n_train, "run": run_path,
               "intercept": coef.as_ref().map(|c| c.0), "coefficients": coef.as_ref().map(|c| c.1.clone()),
               "features": reg.x_scale.names}),
    )
}

fn data_cmd(out: &Out, cmd: DataCmd) -> CliResult<()> {
    use camel_models::data::fetch::{self, FileStatus, KNOWN_SETS};
    let err = |e: fetch::FetchError| CliError::Run(e.into());
    match cmd {
        DataCmd::List { data_dir: dir } => {
            let dir = dir.unwrap_or_else(data_dir);
            for set in &KNOWN_SETS {
                let folder = dir.join(set.name);
                let present = set
                    .files
                    .iter()
                    .filter(|f| folder.join(f.name).is_file())
                    .count();
                let state = if set.files.is_empty() {
                    if folder.is_dir() {
                        "folder present"
                    } else {
                        "absent"
                    }
                    .to_string()
                } else if present == set.files.len() {
                    "present".to_string()
                } else if present == 0 {
                    "absent".to_string()
                } else {
                    format!("partial ({present}/{} files)", set.files.len())
                };
                let how = if set.committed {
                    "in git"
                } else if set.files.is_empty() {
                    "download by hand"
                } else {
                    "camel data fetch"
                };
                let mb = set.files.iter().map(|f| f.bytes).sum::<u64>() as f64 / 1e6;
                out.result(
                    &format!(
                        "{:<16} {:<22} {:<17} {:>7} {}  ({})",
                        set.name,
                        state,
                        how,
                        if set.files.is_empty() { "-".to_string() } else { format!("{mb:.1} MB") },
                        folder.display(),
                        set.about
                    ),
                    json!({"name": set.name, "present": present == set.files.len() && !set.files.is_empty(),
                           "state": state, "committed": set.committed, "path": folder,
                           "urls": set.urls, "bytes": set.files.iter().map(|f| f.bytes).sum::<u64>(),
                           "about": set.about}),
                )?;
            }
            Ok(())
        }
        DataCmd::Fetch {
            name,
            data_dir: dir,
            from,
        } => {
            let set = fetch::known_set(&name).map_err(err)?;
            if set.files.is_empty() {
                return Err(err(fetch::FetchError::NotFetchable {
                    name,
                    note: set.note.to_string(),
                }));
            }
            let folder = dir.unwrap_or_else(data_dir).join(set.name);
            let bases: Vec<String> = match from {
                Some(u) => vec![u],
                None => set.urls.iter().map(|u| u.to_string()).collect(),
            };
            for f in set.files {
                let bar = if out.quiet || out.json {
                    ProgressBar::hidden()
                } else {
                    ProgressBar::new(f.bytes)
                };
                if let Ok(style) = ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec})",
                ) {
                    bar.set_style(style.progress_chars("=> "));
                }
                bar.set_prefix(f.name);
                let got = fetch::fetch_file(&bases, f, &folder, |done, total| {
                    if let Some(t) = total {
                        bar.set_length(t);
                    }
                    bar.set_position(done);
                });
                bar.finish_and_clear();
                let (text, from) = match got.map_err(err)? {
                    fetch::Fetched::AlreadyPresent => {
                        ("already present, checksum OK".to_string(), None)
                    }
                    fetch::Fetched::Downloaded(url) => {
                        (format!("downloaded from {url}, checksum OK"), Some(url))
                    }
                };
                let fresh = from.is_some();
                out.info(
                    &format!("{}: {text}", folder.join(f.name).display()),
                    json!({"event": "file", "set": set.name, "file": f.name, "path": folder.join(f.name),
                           "url": from, "sha256": f.sha256}),
                )?;
                let target = folder.join(set.unpacks_to);
                if f.name.ends_with(".tar.gz")
                    && !set.unpacks_to.is_empty()
                    && (fresh || !target.is_dir())
                {
                    let wrote = fetch::unpack_tar_gz(&folder.join(f.name), &folder).map_err(err)?;
                    out.info(
                        &format!("{}: unpacked into {}", f.name, target.display()),
                        json!({"event": "unpacked", "set": set.name, "file": f.name, "paths": wrote}),
                    )?;
                }
            }
            out.result(
                &format!(
                    "{}: {} files in {}, checksums OK",
                    set.name,
                    set.files.len(),
                    folder.display()
                ),
                json!({"event": "done", "set": set.name, "path": folder}),
            )
        }
        DataCmd::Verify {
            name,
            data_dir: dir,
        } => {
            let dir = dir.unwrap_or_else(data_dir);
            let sets: Vec<&fetch::KnownSet> = match &name {
                Some(n) => vec![fetch::known_set(n).map_err(err)?],
                None => KNOWN_SETS
                    .iter()
                    .filter(|s| dir.join(s.name).is_dir())
                    .collect(),
            };
            let mut bad = 0usize;
            let mut checked = 0usize;
            for set in sets {
                for f in set.files {
                    let path = dir.join(set.name).join(f.name);
                    let status = fetch::verify_file(&path, f.sha256).map_err(err)?;
                    let word = match &status {
                        FileStatus::Ok => "OK",
                        FileStatus::Missing => "MISSING",
                        FileStatus::Mismatch(_) => "MISMATCH",
                    };
                    if status != FileStatus::Ok {
                        bad += 1;
                    }
                    checked += 1;
                    let found = match &status {
                        FileStatus::Mismatch(h) => Some(h.clone()),
                        _ => None,
                    };
                    out.result(
                        &format!(
                            "{word:<8} {}{}",
                            path.display(),
                            found
                                .as_ref()
                                .map(|h| format!(" (sha256 {h}, expected {})", f.sha256))
                                .unwrap_or_default()
                        ),
                        json!({"set": set.name, "file": f.name, "path": path, "status": word,
                               "expected": f.sha256, "found": found}),
                    )?;
                }
                if !set.unpacks_to.is_empty() {
                    let path = dir.join(set.name).join(set.unpacks_to);
                    let word = if path.is_dir() { "OK" } else { "MISSING" };
                    checked += 1;
                    if !path.is_dir() {
                        bad += 1;
                    }
                    out.result(
                        &format!(
                            "{word:<8} {} (unpacked by camel data fetch)",
                            path.display()
                        ),
                        json!({"set": set.name, "path": path, "status": word, "unpacked": true}),
                    )?;
                }
            }
            if bad > 0 {
                return Err(CliError::Run(camel_models::Error::Invalid(format!(
                    "{bad} of {checked} checks failed"
                ))));
            }
            Ok(())
        }
    }
}
