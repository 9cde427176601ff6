//! Reading a recording back from Prometheus: each series' values at every step of a range,
//! and what counters grew by per step, per variant and bucket.

use std::collections::BTreeMap;

use anyhow::Context;

/// Series as `query_range` returns them: labels and a value per step (NaN where none).
pub type Rows = Vec<(BTreeMap<String, String>, Vec<f64>)>;

/// `query_range` of `query`: per series (its labels), the values at each step.
pub async fn range(
    client: &reqwest::Client,
    url: &str,
    query: &str,
    start: f64,
    end: f64,
    step: u32,
) -> anyhow::Result<Rows> {
    let form: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("query", query)
        .append_pair("start", &format!("{start:.3}"))
        .append_pair("end", &format!("{end:.3}"))
        .append_pair("step", &step.to_string())
        .finish();
    let body: serde_json::Value = serde_json::from_slice(
        &client
            .post(format!("{url}/api/v1/query_range"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await?
            .bytes()
            .await?,
    )?;
    let points = ((end - start) / f64::from(step)).floor() as usize + 1;
    let mut out = Vec::new();
    for series in body["data"]["result"].as_array().context("no result")? {
        let labels = series["metric"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let mut values = vec![f64::NAN; points];
        for v in series["values"].as_array().into_iter().flatten() {
            let t = v[0].as_f64().unwrap_or(0.0);
            let i = ((t - start) / f64::from(step)).round() as usize;
            if let (Some(slot), Some(x)) = (
                values.get_mut(i),
                v[1].as_str().and_then(|s| s.parse().ok()),
            ) {
                *slot = x;
            }
        }
        out.push((labels, values));
    }
    Ok(out)
}

/// Per step, what a counter grew by since the step before (a reset counts from zero).
pub fn increments(values: &[f64]) -> Vec<f64> {
    values
        .windows(2)
        .map(|w| {
            let d = w[1] - w[0];
            if d.is_nan() {
                0.0
            } else if d < 0.0 {
                w[1]
            } else {
                d
            }
        })
        .collect()
}

pub fn variant_series<'a>(
    rows: &'a Rows,
    variant: &str,
) -> impl Iterator<Item = &'a (BTreeMap<String, String>, Vec<f64>)> {
    let variant = variant.to_string();
    rows.iter()
        .filter(move |(l, _)| l.get("variant") == Some(&variant))
}

/// Per step, the cumulative buckets' increments in `bounds` order, `+Inf` last.
pub fn bucket_steps(rows: &Rows, variant: &str, bounds: &[f64]) -> Vec<Vec<f64>> {
    let mut by_le: Vec<(f64, Vec<f64>)> = variant_series(rows, variant)
        .filter_map(|(l, v)| Some((l.get("le")?.parse::<f64>().ok()?, increments(v))))
        .collect();
    by_le.sort_by(|a, b| a.0.total_cmp(&b.0));
    let steps = by_le.first().map_or(0, |(_, v)| v.len());
    (0..steps)
        .map(|i| {
            let mut row: Vec<f64> = bounds
                .iter()
                .map(|b| {
                    by_le
                        .iter()
                        .find(|(le, _)| le == b)
                        .map_or(0.0, |(_, v)| v[i])
                })
                .collect();
            row.push(
                by_le
                    .iter()
                    .find(|(le, _)| le.is_infinite())
                    .map_or(0.0, |(_, v)| v[i]),
            );
            row
        })
        .collect()
}

pub fn bounds_of(rows: &Rows) -> Vec<f64> {
    let mut b: Vec<f64> = rows
        .iter()
        .filter_map(|(l, _)| l.get("le")?.parse::<f64>().ok())
        .filter(|b| b.is_finite())
        .collect();
    b.sort_by(f64::total_cmp);
    b.dedup();
    b
}
