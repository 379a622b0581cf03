//! `camel`: train the models of camel from the command line.
//!
//! ```text
//! camel train mlp --data mnist --epochs 5 --batch-size 64 --lr 1e-3 --seed 0 [--device cuda]
//! ```

use camel_models::data::{data_dir, DataLoader, Mnist};
use camel_models::train::{evaluate, train_epoch};
use camel_models::Mlp;
use camel_nn::{Device, Module};
use camel_optim::{Adam, Optimizer, Sgd};
use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "camel",
    version,
    about = "Train small models with camel's own kernels"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Train a model.
    Train {
        #[command(subcommand)]
        model: Model,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Opt {
    Adam,
    Adamw,
    Sgd,
}

#[derive(Subcommand)]
enum Model {
    /// A multi-layer perceptron on MNIST-style images (784-256-256-10 by default).
    Mlp {
        /// Data set: mnist or fashion-mnist.
        #[arg(long, default_value = "mnist")]
        data: String,
        /// Folder holding the data sets (default: $CAMEL_DATA_DIR, else datasets/).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        #[arg(long, default_value_t = 5)]
        epochs: usize,
        #[arg(long, default_value_t = 64)]
        batch_size: usize,
        #[arg(long, default_value_t = 1e-3)]
        lr: f32,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// cpu, cuda or cuda:N.
        #[arg(long, default_value = "cpu")]
        device: Device,
        /// Hidden layer widths, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "256,256")]
        hidden: Vec<usize>,
        #[arg(long, value_enum, default_value_t = Opt::Adam)]
        optimizer: Opt,
        /// Train on the first N training images only.
        #[arg(long)]
        subset: Option<usize>,
        /// Hide the progress bar.
        #[arg(long)]
        quiet: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> camel_models::Result<()> {
    let Cmd::Train { model } = cli.cmd;
    let Model::Mlp {
        data,
        data_dir: dir,
        epochs,
        batch_size,
        lr,
        seed,
        device,
        hidden,
        optimizer,
        subset,
        quiet,
    } = model;
    let dir = dir.unwrap_or_else(data_dir);
    let t0 = std::time::Instant::now();
    let mut ds = Mnist::load(&dir, &data)?;
    if let Some(n) = subset {
        ds.train = ds.train.subset(n);
    }
    let d_in = ds.train.rows * ds.train.cols;
    let mut sizes = vec![d_in];
    sizes.extend(&hidden);
    sizes.push(10);
    let model = Mlp::new(&sizes, seed, device)?;
    println!(
        "camel: MLP {:?} ({} parameters) on {data} ({} train / {} test, loaded in {:.1}s), device {device}, batch {batch_size}, lr {lr}",
        sizes,
        model.num_parameters(),
        ds.train.n,
        ds.test.n,
        t0.elapsed().as_secs_f64()
    );
    let mut opt: Box<dyn Optimizer> = match optimizer {
        Opt::Adam => Box::new(Adam::new(model.parameters(), lr)),
        Opt::Adamw => Box::new(Adam::adamw(model.parameters(), lr, 0.01)),
        Opt::Sgd => Box::new(Sgd::new(model.parameters(), lr).momentum(0.9)),
    };
    let loader = DataLoader::new(ds.train.n, batch_size)?.shuffle(Some(seed));
    for epoch in 1..=epochs {
        let bar = if quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(loader.num_batches() as u64)
        };
        bar.set_style(
            ProgressStyle::with_template("epoch {prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
                .expect("progress template")
                .progress_chars("=> "),
        );
        bar.set_prefix(format!("{epoch}/{epochs}"));
        let (train_loss, steps, secs) = train_epoch(
            &model,
            opt.as_mut(),
            &ds.train,
            &loader,
            epoch as u64,
            device,
            50,
            |s, _, l| {
                bar.set_position(s as u64);
                bar.set_message(format!("loss {l:.4}"));
            },
        )?;
        bar.finish_and_clear();
        let (test_loss, test_acc) = evaluate(&model, &ds.test, 1000, device)?;
        println!(
            "epoch {epoch}/{epochs}: train loss {train_loss:.4}  test loss {test_loss:.4}  test acc {:.2}%  time {secs:.2}s ({:.3} ms/step)",
            test_acc * 100.0,
            secs * 1e3 / steps.max(1) as f64
        );
    }
    Ok(())
}
