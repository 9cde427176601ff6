//! The patch an `external` promotion reports, and the fingerprint that recognises the target
//! once Git applied it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, EnvVar};

use super::fixtures::*;
use crate::api::{FalconMode, ServerConfig};
use crate::workload::*;

fn app(d: &mut Deployment) -> &mut Container {
    let pod = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    &mut pod.containers[0]
}

/// What a strategic merge of the reported patch does to the app container, as the API server
/// (or Kustomize) would: env entries merge by name, `$patch: delete` removes one, lists like
/// command and args are replaced.
fn commit(target: &Deployment, patch: &crate::api::PromotionPatch) -> Deployment {
    let v: serde_yaml::Value = serde_yaml::from_str(&patch.strategic_merge_patch).unwrap();
    let entry = &v["spec"]["template"]["spec"]["containers"][0];
    let mut out = target.clone();
    let c = app(&mut out);
    assert_eq!(entry["name"].as_str(), Some(c.name.as_str()));
    let env = c.env.get_or_insert_with(Vec::new);
    for e in entry["env"].as_sequence().into_iter().flatten() {
        let name = e["name"].as_str().unwrap();
        if e["$patch"].as_str() == Some("delete") {
            env.retain(|v| v.name != name);
        } else {
            let var: EnvVar = serde_yaml::from_value(e.clone()).unwrap();
            match env.iter_mut().find(|v| v.name == name) {
                Some(old) => *old = var,
                None => env.push(var),
            }
        }
    }
    if let Some(command) = entry.get("command") {
        c.command = serde_yaml::from_value(command.clone()).unwrap();
    }
    if let Some(args) = entry.get("args") {
        c.args = serde_yaml::from_value(args.clone()).unwrap();
    }
    out
}

#[test]
fn the_patch_sets_only_what_the_candidate_changes_and_committing_it_promotes() {
    let target = storefront();
    let config = puma(2, 4);
    let patch = promotion_patch(&target, &config, None).unwrap();
    assert_eq!(
        patch.summary,
        "set RAILS_MAX_THREADS=4, PUMA_MAX_THREADS=4, PUMA_MIN_THREADS=4 on container app"
    );
    assert_eq!(patch.container, "app");
    assert_eq!(
        patch.strategic_merge_patch,
        "spec:\n  template:\n    spec:\n      containers:\n      - name: app\n        env:\n        \
         - name: RAILS_MAX_THREADS\n          value: '4'\n        - name: PUMA_MAX_THREADS\n          \
         value: '4'\n        - name: PUMA_MIN_THREADS\n          value: '4'\n"
    );
    let committed = commit(&target, &patch);
    assert!(runs_config(&committed, &config, None));
    assert_eq!(
        promoted_fingerprint(&committed, &config, None),
        promoted_fingerprint(&target, &config, None)
    );
    // Once committed there is nothing left to change.
    let again = promotion_patch(&committed, &config, None).unwrap();
    assert_eq!(
        again.summary,
        "nothing to change: container app already runs it"
    );
}

#[test]
fn falcon_removes_pumas_variables_keeps_the_pool_and_sets_its_command() {
    let target = storefront();
    let config = falcon(2, Some(FalconMode::Host));
    let patch = promotion_patch(&target, &config, None).unwrap();
    // RAILS_MAX_THREADS sizes a default database.yml's pool: promotion must not drop it.
    assert_eq!(
        patch.summary,
        "remove PUMA_MAX_THREADS, PUMA_MIN_THREADS; command [falcon, host] on container app"
    );
    assert!(patch.strategic_merge_patch.contains("$patch: delete"));
    let committed = commit(&target, &patch);
    assert!(runs_config(&committed, &config, None));
    assert_eq!(
        promoted_fingerprint(&committed, &config, None),
        promoted_fingerprint(&target, &config, None)
    );
}

#[test]
fn the_fingerprint_ignores_env_order_but_nothing_else() {
    let target = storefront();
    let config = puma(2, 4);
    let expected = promoted_fingerprint(&target, &config, None);
    assert!(expected.is_some());
    // Written into the manifest by hand, in another order: the same.
    let mut by_hand = promoted_template(&target, &config, None).unwrap();
    by_hand.spec.as_mut().unwrap().containers[0]
        .env
        .as_mut()
        .unwrap()
        .reverse();
    let mut git = target.clone();
    git.spec.as_mut().unwrap().template = by_hand;
    assert!(runs_config(&git, &config, None));
    assert_eq!(promoted_fingerprint(&git, &config, None), expected);
    // The same commit with a new image: another template.
    let mut with_image = git.clone();
    app(&mut with_image).image = Some("ruby-app:2".into());
    assert!(runs_config(&with_image, &config, None));
    assert_ne!(promoted_fingerprint(&with_image, &config, None), expected);
    // Another variable changed too: another template.
    let mut with_env = git.clone();
    let env = app(&mut with_env).env.as_mut().unwrap();
    let rails_env = env.iter_mut().find(|v| v.name == "RAILS_ENV").unwrap();
    rails_env.value = Some("staging".into());
    assert_ne!(promoted_fingerprint(&with_env, &config, None), expected);
}

#[test]
fn a_custom_env_entry_and_resources_are_part_of_the_patch() {
    let target = storefront();
    let config = ServerConfig {
        env: env(&[("RUBY_YJIT_ENABLE", "1")]),
        resources: Some(memory("1Gi")),
        ..puma(3, 6)
    };
    let patch = promotion_patch(&target, &config, None).unwrap();
    assert_eq!(
        patch.summary,
        "set WEB_CONCURRENCY=3, RUBY_YJIT_ENABLE=1; resources from spec.candidate.resources on \
         container app"
    );
    assert!(patch.strategic_merge_patch.contains("memory: 1Gi"));
    assert!(promotion_patch(&target, &config, Some("nope")).is_err());
}

#[test]
fn falcon_with_a_db_pool_promotes_the_pool_into_the_target() {
    let target = storefront();
    let config = ServerConfig {
        db_pool: Some(12),
        ..falcon(2, Some(FalconMode::Host))
    };
    let patch = promotion_patch(&target, &config, None).unwrap();
    let committed = commit(&target, &patch);
    assert!(runs_config(&committed, &config, None));
    let read = read_baseline(&committed, None, &Default::default()).unwrap();
    assert_eq!(read.db_pool, Some(12));
    assert_eq!(read.summary(), "falcon 2 workers, pool 12");
}
