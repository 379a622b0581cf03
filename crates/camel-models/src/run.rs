//! Run folders: what a training run leaves behind.
//!
//! A run folder holds `command.txt` (the exact command line), `config.json` (the validated
//! configuration, enough to rebuild the model), `metrics.jsonl` (one JSON object per
//! evaluation, see [`Metrics`]), `model.safetensors` (the best checkpoint so far, through
//! [`camel_nn::Module::state_dict`]) and `plot.png` (loss and accuracy curves).

use crate::{Error, Result};
use camel_nn::{save_safetensors, Module};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// File name of the checkpoint inside a run folder.
pub const CHECKPOINT: &str = "model.safetensors";
/// File name of the configuration inside a run folder.
pub const CONFIG: &str = "config.json";
/// File name of the metrics log inside a run folder.
pub const METRICS: &str = "metrics.jsonl";
/// File name of the loss/accuracy plot inside a run folder.
pub const PLOT: &str = "plot.png";
/// File name of the command line inside a run folder.
pub const COMMAND: &str = "command.txt";

/// One evaluation of a run: a line of `metrics.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Optimizer steps taken so far.
    pub step: usize,
    /// 1-based epoch that just ended; 0 for a run without epochs (GPT-mini draws random
    /// windows), whose plot then runs over the optimizer step.
    pub epoch: usize,
    /// Mean training loss over the epoch.
    pub train_loss: f32,
    /// Mean loss on the held-out data.
    pub test_loss: f32,
    /// Accuracy on the held-out data in [0, 1] (classifiers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_acc: Option<f32>,
    /// Seconds since the run started.
    pub seconds: f64,
}

/// A run folder being written.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    history: Vec<Metrics>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl RunDir {
    /// Creates `path` (and its parents) and writes `command.txt` and `config.json`. A folder
    /// that already holds a `metrics.jsonl` is refused, so a run never mixes with another's.
    pub fn create(path: &Path, command: &[String], config: &serde_json::Value) -> Result<RunDir> {
        Self::check_new(path)?;
        std::fs::create_dir_all(path).map_err(io_err(path))?;
        let cmd = path.join(COMMAND);
        std::fs::write(&cmd, format!("{}\n", shell_join(command))).map_err(io_err(&cmd))?;
        let cfg = path.join(CONFIG);
        let text =
            serde_json::to_string_pretty(config).map_err(|e| Error::Invalid(e.to_string()))?;
        std::fs::write(&cfg, text + "\n").map_err(io_err(&cfg))?;
        let m = path.join(METRICS);
        std::fs::write(&m, "").map_err(io_err(&m))?;
        Ok(RunDir {
            path: path.to_path_buf(),
            history: Vec::new(),
        })
    }

    /// Fails if `path` already holds a run (a `metrics.jsonl`), so a run never mixes with
    /// another's.
    pub fn check_new(path: &Path) -> Result<()> {
        if path.join(METRICS).exists() {
            return Err(Error::Invalid(format!(
                "--out {}: already holds a run ({METRICS} exists); choose another folder",
                path.display()
            )));
        }
        Ok(())
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Evaluations logged so far.
    pub fn history(&self) -> &[Metrics] {
        &self.history
    }

    /// Appends `m` to `metrics.jsonl` and redraws `plot.png`.
    pub fn log(&mut self, m: Metrics) -> Result<()> {
        let path = self.path.join(METRICS);
        let line = serde_json::to_string(&m).map_err(|e| Error::Invalid(e.to_string()))?;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        writeln!(f, "{line}").map_err(io_err(&path))?;
        self.history.push(m);
        crate::plot::plot_metrics(&self.history, &self.path.join(PLOT))
    }

    /// Writes `model`'s state dict to `model.safetensors` with `metadata` in the header.
    pub fn save_checkpoint(
        &self,
        model: &dyn Module,
        metadata: std::collections::HashMap<String, String>,
    ) -> Result<()> {
        save_safetensors(
            &model.state_dict(),
            Some(metadata),
            &self.path.join(CHECKPOINT),
        )?;
        Ok(())
    }
}

/// Reads a run folder's `metrics.jsonl`.
pub fn read_metrics(dir: &Path) -> Result<Vec<Metrics>> {
    let path = dir.join(METRICS);
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| Error::Invalid(format!("{}: line {}: {e}", path.display(), i + 1)))
        })
        .collect()
}

/// Reads a run folder's `config.json`.
pub fn read_config(dir: &Path) -> Result<serde_json::Value> {
    let path = dir.join(CONFIG);
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    serde_json::from_str(&text)
        .map_err(|e| Error::Invalid(format!("{}: not valid JSON: {e}", path.display())))
}

/// `runs/<model>-<UTC date>-<time>`, the default run folder.
pub fn default_run_dir(model: &str) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    PathBuf::from("runs").join(format!("{model}-{}", utc_stamp(secs)))
}

/// `YYYYMMDD-HHMMSS` (UTC) of a Unix time.
pub fn utc_stamp(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let rem = unix_secs % 86_400;
    // civil-from-days (proleptic Gregorian calendar)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The arguments as one line a POSIX shell reads back as the same arguments.
pub fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
