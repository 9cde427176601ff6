//! The dashboard's page: pure functions of the experiments seen and the time. The table's body
//! is also served alone (`/rows`), which the page fetches every few seconds to stay live.

use std::fmt::Write;

use jiff::Timestamp;
use kube::ResourceExt;

use crate::api::ConcurrencyExperiment;
use crate::kubectl::render::{self, hold_lines, list_row, mark, units, value};
use crate::kubectl::report::svg::esc;

const HEADER: [&str; 9] = [
    "Experiment",
    "Phase",
    "Stage",
    "Configs",
    "Latest analysis",
    "Waiting for",
    "Decision",
    "Age",
    "",
];

/// How often the page asks for the table again.
pub const REFRESH_MS: u32 = 2000;

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:20px;color:#1d1d1f}
h1{font-size:20px;margin:0 0 2px}.sub{color:#555;margin:0 0 12px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:5px 7px;border-bottom:1px solid #eee;vertical-align:top}
th{background:#f6f8fa;position:sticky;top:0}
td.phase{font-weight:600}
tr[data-phase=Succeeded] td.phase{color:#1a7f37}tr[data-phase=RolledBack] td.phase,tr[data-phase=RollingBack] td.phase{color:#cf222e}
tr[data-phase=Invalid] td.phase{color:#8a6100}
.hold{background:#fff8e1;border:1px solid #f0d78c;padding:2px 6px;display:inline-block;margin-top:3px}
.checks{font-size:12px;color:#444}.checks span{white-space:nowrap}
.Fail{color:#cf222e}.Inconclusive{color:#57606a}
#live{font-size:12px;color:#888}#live.off{color:#cf222e}
"#;

/// The whole page, with the table as it is now.
pub fn page(exps: &[&ConcurrencyExperiment], scope: &str, now: Timestamp) -> String {
    let mut head = String::new();
    for h in HEADER {
        let _ = write!(head, "<th>{h}</th>");
    }
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>Concurrency experiments</title><style>{STYLE}</style></head><body>
<h1>Concurrency experiments</h1><p class="sub">{} · read-only · <span id="live">updated {}</span></p>
<table><thead><tr>{head}</tr></thead><tbody id="rows">{}</tbody></table>
<script>
// Live: the table's body again every {REFRESH_MS} ms; the page itself is never reloaded.
async function refresh() {{
  const live = document.getElementById('live');
  try {{
    const r = await fetch('rows', {{cache: 'no-store'}});
    if (!r.ok) throw new Error(r.status);
    document.getElementById('rows').innerHTML = await r.text();
    live.textContent = 'updated ' + new Date().toISOString().slice(11, 19);
    live.className = '';
  }} catch (e) {{
    live.textContent = 'not updated since ' + live.textContent.replace(/^.*?(\d\d:\d\d:\d\d).*$/, '$1') + ' (' + e + ')';
    live.className = 'off';
  }}
}}
setInterval(refresh, {REFRESH_MS});
</script></body></html>
"#,
        esc(scope),
        now.strftime("%H:%M:%S"),
        rows(exps, now)
    )
}

/// One row per experiment, sorted by namespace and name.
pub fn rows(exps: &[&ConcurrencyExperiment], now: Timestamp) -> String {
    let mut sorted: Vec<&&ConcurrencyExperiment> = exps.iter().collect();
    sorted.sort_by_key(|e| (e.namespace().unwrap_or_default(), e.name_any()));
    if sorted.is_empty() {
        return r#"<tr><td colspan="9">No ConcurrencyExperiment here yet.</td></tr>"#.into();
    }
    sorted.into_iter().map(|e| row(e, now)).collect()
}

fn row(exp: &ConcurrencyExperiment, now: Timestamp) -> String {
    let st = render::status(exp);
    let ns = exp.namespace().unwrap_or_default();
    let name = exp.name_any();
    let cells = list_row(exp, now);
    let mut out = format!(
        r#"<tr data-namespace="{}" data-name="{}" data-phase="{}" data-stage="{}" data-planned="{}" data-effective="{}">"#,
        esc(&ns),
        esc(&name),
        st.phase.as_str(),
        esc(st.stage.as_deref().unwrap_or("")),
        st.planned_weight,
        st.effective_weight
    );
    // `get`'s columns (render::LIST_HEADER), grouped to fit a window.
    let cell = |i: usize| cells.get(i).map_or("", String::as_str);
    let _ = write!(
        out,
        r#"<td><strong>{}</strong><br><small>{} · Deployment {}</small></td><td class="phase">{}</td><td>{}<br><small>{} planned · {} in force</small></td><td>{} → {}</td>"#,
        esc(cell(0)),
        esc(&ns),
        esc(cell(1)),
        esc(cell(2)),
        esc(cell(3)),
        esc(cell(4)),
        esc(cell(5)),
        esc(cell(7)),
        esc(cell(8)),
    );
    // The latest analysis: its verdict, each check's baseline / candidate and verdict.
    let _ = write!(out, r#"<td class="checks">{}"#, esc(cell(6)));
    if let Some(a) = st.analyses.last() {
        let units = units(exp);
        for c in &a.checks {
            let _ = write!(
                out,
                r#"<br><span class="{}" data-check="{}">{} {} / {} {}</span>"#,
                c.verdict.as_str(),
                esc(&c.name),
                esc(&c.name),
                esc(&value(&units, &c.name, c.baseline)),
                esc(&value(&units, &c.name, c.candidate)),
                mark(c.verdict)
            );
        }
    }
    out.push_str("</td><td>");
    // What a person must do for it to go on: approve, resume, commit to Git, retry.
    for line in hold_lines(exp, &st) {
        let text = line
            .split_once(':')
            .map_or(line.as_str(), |(_, rest)| rest.trim());
        let _ = write!(out, r#"<div class="hold">{}</div>"#, esc(text));
    }
    let _ = write!(
        out,
        r#"</td><td>{}</td><td>{}</td><td><a class="report" href="report/{}/{}">report</a></td></tr>"#,
        esc(cell(9)),
        esc(cell(10)),
        esc(&ns),
        esc(&name)
    );
    out
}
