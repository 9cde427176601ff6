//! The CRD's rules on the real apiserver.

use anyhow::Context as _;
use e2e_tests::{api_message, ensure, latency_check, run, ConcurrencyExperiment, Exp, Scenario};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};

const MANIFESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/invalid");
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");

/// `*.yaml` of `dir`, sorted.
fn yaml_files(dir: &str) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {dir}"))?
        .filter_map(|f| f.ok().map(|f| f.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    Ok(files)
}

fn dynamic(s: &Scenario) -> Api<DynamicObject> {
    let ar = ApiResource::erase::<ConcurrencyExperiment>(&());
    Api::namespaced_with(s.client.clone(), &s.ns, &ar)
}

/// Every manifest in e2e/manifests/invalid/ refused by the apiserver naming its field; the
/// fields fixed once created refused on edit; the documented examples accepted.
#[tokio::test]
#[ignore = "needs the e2e cluster (e2e/run)"]
async fn invalid() {
    run("invalid", async |s| {
        let api = dynamic(s);
        let mut n = 0;
        for f in yaml_files(MANIFESTS)? {
            let text = std::fs::read_to_string(&f)?;
            let base = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let expect = text
                .lines()
                .find_map(|l| l.strip_prefix("# expect: "))
                .with_context(|| format!("{base} has no '# expect:' line"))?;
            // Untyped: most of these would not even deserialize into the CRD's types.
            let obj: DynamicObject = serde_yaml::from_str(&text).with_context(|| format!("parsing {base}"))?;
            match api.create(&PostParams::default(), &obj).await {
                Ok(_) => anyhow::bail!("{base} was accepted"),
                Err(e) => {
                    let msg = api_message(&e);
                    ensure!(msg.contains(expect), "{base}: refusal does not name {expect}: {msg}");
                }
            }
            n += 1;
        }
        ensure!(n >= 8, "only {n} invalid manifests");
        s.log(format!("{n} invalid manifests refused by the apiserver, each naming its field"));

        // Fields fixed once created: an edit is refused naming the field (CEL transition rules).
        s.apply(&Exp::new("fixed", serde_json::json!({"server": "puma", "workers": 2, "threads": 4}), latency_check()))
            .await?;
        let edits = [
            (serde_json::json!({"spec": {"targetRef": {"name": "checkout"}}}), "spec.targetRef is immutable"),
            (serde_json::json!({"spec": {"container": "app"}}), "spec.container is immutable"),
            (
                serde_json::json!({"spec": {"traffic": {"router": "gatewayAPI", "httpRoute": "storefront"}}}),
                "spec.traffic is immutable",
            ),
        ];
        for (edit, expect) in edits {
            match s.cexps.patch("fixed", &PatchParams::default(), &Patch::Merge(&edit)).await {
                Ok(_) => anyhow::bail!("edit {edit} was accepted"),
                Err(e) => {
                    let msg = api_message(&e);
                    ensure!(msg.contains(expect), "edit refused without naming the field: {msg}");
                }
            }
        }
        // A mutable edit still goes through.
        let paused = serde_json::json!({"spec": {"paused": true}});
        s.cexps
            .patch("fixed", &PatchParams::default(), &Patch::Merge(&paused))
            .await
            .context("spec.paused edit refused")?;
        s.log("targetRef, container and traffic edits refused; paused accepted");

        // And the documented examples are accepted (the CEL rules fit the apiserver's cost
        // budget), typed as the operator reads them.
        let dry = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        for f in yaml_files(EXAMPLES)? {
            let e: ConcurrencyExperiment = serde_yaml::from_str(&std::fs::read_to_string(&f)?)
                .with_context(|| format!("example {} does not fit the CRD types", f.display()))?;
            s.cexps
                .create(&dry, &e)
                .await
                .with_context(|| format!("example {} refused", f.display()))?;
        }
        Ok(())
    })
    .await;
}
