//! Tabular regression: a linear model or an MLP fitted with MSE to one numeric column of a
//! table, on standardized features, with a seeded held-out split.

use crate::data::{train_test_split, DataLoader, Standardizer, Table};
use crate::run::Metrics;
use crate::{Error, Mlp, Result};
use camel_nn::{no_grad, Device, Module, Tensor};
use camel_optim::{Adam, Optimizer};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

/// What to fit and how; written to a run folder's `config.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RegressionConfig {
    /// The TSV/CSV file.
    pub data: PathBuf,
    /// Column to predict.
    pub target: String,
    /// Feature columns (default: every column but the target).
    pub features: Option<Vec<String>>,
    /// Hidden widths; empty for a linear model.
    pub hidden: Vec<usize>,
    /// Passes over the training rows.
    pub epochs: usize,
    /// Rows per step.
    pub batch_size: usize,
    /// Adam's learning rate.
    pub lr: f32,
    /// Seed of the split, the initialization and the batch order.
    pub seed: u64,
    /// Share of rows held out for testing, in (0, 1).
    pub test_fraction: f64,
}

/// A fitted regression model with the scalings of its inputs and target.
pub struct Regression {
    /// The network, on standardized inputs and target.
    pub model: Mlp,
    /// Feature scaling (fitted on training rows).
    pub x_scale: Standardizer,
    /// Target scaling (fitted on training rows), one column.
    pub y_scale: Standardizer,
    /// Device the model lives on.
    pub device: Device,
}

/// Held-out quality of a fit, in the target's units.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RegressionScore {
    /// Root mean squared error.
    pub rmse: f32,
    /// Coefficient of determination, 1 − SSE/SST.
    pub r2: f32,
    /// Training rows.
    pub n_train: usize,
    /// Held-out rows.
    pub n_test: usize,
}

fn rows(x: &[f32], d: usize, idx: &[usize]) -> Vec<f32> {
    idx.iter()
        .flat_map(|&i| x[i * d..(i + 1) * d].iter().copied())
        .collect()
}

impl Regression {
    /// Loads `cfg.data`, splits, standardizes and trains; `on_eval` sees each epoch's metrics
    /// (losses are MSE on the standardized target). Returns the model and its held-out score.
    pub fn fit(
        cfg: &RegressionConfig,
        device: Device,
        mut on_eval: impl FnMut(&Metrics, &Regression) -> Result<()>,
    ) -> Result<(Regression, RegressionScore)> {
        if !(cfg.test_fraction > 0.0 && cfg.test_fraction < 1.0) {
            return Err(Error::Invalid(format!(
                "test fraction must be in (0, 1), got {}",
                cfg.test_fraction
            )));
        }
        let table = Table::load(&cfg.data)?;
        let crate::data::Selection { names, x, y } =
            table.select(cfg.features.as_deref(), &cfg.target, &cfg.data)?;
        let d = names.len();
        if table.rows < 2 {
            return Err(Error::Invalid(format!(
                "{}: need at least 2 rows to hold some out, got {}",
                cfg.data.display(),
                table.rows
            )));
        }
        let (tr, te) = train_test_split(table.rows, cfg.test_fraction, cfg.seed);
        let (x_tr, x_te) = (rows(&x, d, &tr), rows(&x, d, &te));
        let (y_tr, y_te): (Vec<f32>, Vec<f32>) = (
            tr.iter().map(|&i| y[i]).collect(),
            te.iter().map(|&i| y[i]).collect(),
        );
        let x_scale = Standardizer::fit(&names, &x_tr);
        let y_scale = Standardizer::fit(std::slice::from_ref(&cfg.target), &y_tr);
        let xs_tr = x_scale.apply(&x_tr);
        let ys_tr = y_scale.apply(&y_tr);
        let mut sizes = vec![d];
        sizes.extend(&cfg.hidden);
        sizes.push(1);
        let reg = Regression {
            model: Mlp::new(&sizes, cfg.seed, device)?,
            x_scale,
            y_scale,
            device,
        };
        let mut opt = Adam::new(reg.model.parameters(), cfg.lr)?;
        let loader = DataLoader::new(tr.len(), cfg.batch_size)?.shuffle(Some(cfg.seed));
        let start = Instant::now();
        let mut step = 0usize;
        for epoch in 1..=cfg.epochs {
            let mut sum = Tensor::zeros(&[], device)?;
            let mut batches = 0usize;
            for idx in loader.epoch(epoch as u64) {
                let xb = Tensor::from_vec(rows(&xs_tr, d, &idx), &[idx.len(), d], device)?;
                let yb = Tensor::from_vec(
                    idx.iter().map(|&i| ys_tr[i]).collect(),
                    &[idx.len(), 1],
                    device,
                )?;
                opt.zero_grad();
                let loss = reg.model.forward(&xb)?.mse(&yb)?;
                loss.backward()?;
                opt.step()?;
                sum = no_grad(|| sum.add(&loss.detach()))?;
                batches += 1;
                step += 1;
            }
            let train_loss = sum.item()? / batches.max(1) as f32;
            crate::train::check_finite(
                train_loss,
                || format!("epoch {epoch} (step {step})"),
                opt.lr(),
            )?;
            let pred = reg.predict(&x_te)?;
            let test_loss = pred
                .iter()
                .zip(&y_te)
                .map(|(p, t)| ((p - t) / reg.y_scale.std[0]).powi(2))
                .sum::<f32>()
                / y_te.len() as f32;
            let m = Metrics {
                step,
                epoch,
                train_loss,
                test_loss,
                test_acc: None,
                seconds: start.elapsed().as_secs_f64(),
            };
            on_eval(&m, &reg)?;
        }
        let score = reg.score(&x_te, &y_te, tr.len())?;
        Ok((reg, score))
    }

    /// Predictions in the target's units for raw feature rows `x` (`n × features`).
    pub fn predict(&self, x: &[f32]) -> Result<Vec<f32>> {
        let d = self.x_scale.names.len();
        let n = x.len() / d.max(1);
        let xs = Tensor::from_vec(self.x_scale.apply(x), &[n, d], self.device)?;
        let out = no_grad(|| self.model.forward(&xs))?.to_vec()?;
        Ok(out.iter().map(|&z| self.y_scale.invert(0, z)).collect())
    }

    /// RMSE and R² of the predictions for `x` against `y`.
    pub fn score(&self, x: &[f32], y: &[f32], n_train: usize) -> Result<RegressionScore> {
        let pred = self.predict(x)?;
        let n = y.len().max(1) as f64;
        let mean = y.iter().map(|&v| v as f64).sum::<f64>() / n;
        let sse: f64 = pred
            .iter()
            .zip(y)
            .map(|(&p, &t)| (p as f64 - t as f64).powi(2))
            .sum();
        let sst: f64 = y.iter().map(|&t| (t as f64 - mean).powi(2)).sum();
        Ok(RegressionScore {
            rmse: (sse / n).sqrt() as f32,
            r2: if sst > 0.0 {
                (1.0 - sse / sst) as f32
            } else {
                f32::NAN
            },
            n_train,
            n_test: y.len(),
        })
    }

    /// For a linear model (no hidden layer): the intercept and one coefficient per feature in
    /// the original units, `y ≈ b + Σ cⱼ·xⱼ`. `None` for an MLP.
    pub fn linear_coefficients(&self) -> Result<Option<(f32, Vec<f32>)>> {
        if self.model.sizes().len() != 2 {
            return Ok(None);
        }
        let state = self.model.state_dict();
        let (Some(w), Some(b)) = (state.get("0.weight"), state.get("0.bias")) else {
            return Ok(None);
        };
        let (w, b) = (w.to_vec()?, b.to_vec()?[0]);
        let (xs, ys) = (&self.x_scale, &self.y_scale);
        let coef: Vec<f32> = w
            .iter()
            .enumerate()
            .map(|(j, &wj)| ys.std[0] * wj / xs.std[j])
            .collect();
        let intercept =
            ys.mean[0] + ys.std[0] * b - coef.iter().zip(&xs.mean).map(|(c, m)| c * m).sum::<f32>();
        Ok(Some((intercept, coef)))
    }
}
