use super::fixtures::{container, puma_2x6, storefront};
use crate::workload::fingerprint::*;
use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};

fn template() -> PodTemplateSpec {
    storefront().spec.unwrap().template
}

fn fingerprint(edit: impl FnOnce(&mut PodTemplateSpec)) -> TemplateFingerprint {
    let mut t = template();
    edit(&mut t);
    TemplateFingerprint::of(&t)
}

fn app(t: &mut PodTemplateSpec) -> &mut Container {
    &mut t.spec.as_mut().unwrap().containers[0]
}

#[test]
fn same_template_same_fingerprint_and_it_reads_back() {
    let a = TemplateFingerprint::of(&template());
    assert_eq!(a, TemplateFingerprint::of(&template()));
    let text = a.to_string();
    assert!(
        text.starts_with("t=") && text.len() == 2 + 16 + 3 * (3 + 8),
        "{text}"
    );
    assert_eq!(TemplateFingerprint::parse(&text), a);
    assert!(a.changes(&a).is_empty());
    // Key order does not matter: labels are a map either way, and serialization sorts.
    let mut relabelled = template();
    let meta = relabelled.metadata.get_or_insert_with(Default::default);
    let labels = meta.labels.get_or_insert_with(Default::default);
    labels.insert("a-first".into(), "1".into());
    labels.insert("z-last".into(), "2".into());
    let mut reordered = template();
    let meta = reordered.metadata.get_or_insert_with(Default::default);
    let labels = meta.labels.get_or_insert_with(Default::default);
    labels.insert("z-last".into(), "2".into());
    labels.insert("a-first".into(), "1".into());
    assert_eq!(
        TemplateFingerprint::of(&relabelled),
        TemplateFingerprint::of(&reordered)
    );
}

#[test]
fn each_kind_of_edit_is_named() {
    let before = TemplateFingerprint::of(&template());
    let changes = |after: TemplateFingerprint| before.changes(&after);
    assert_eq!(
        changes(fingerprint(|t| app(t).image = Some("ruby-app:2".into()))),
        ["image"]
    );
    assert_eq!(
        changes(fingerprint(|t| app(t)
            .env
            .get_or_insert_with(Vec::new)
            .push(EnvVar {
                name: "FEATURE".into(),
                value: Some("on".into()),
                value_from: None,
            }))),
        ["env"]
    );
    assert_eq!(
        changes(fingerprint(|t| app(t).name = "web".into())),
        ["container set"]
    );
    assert_eq!(
        changes(fingerprint(|t| t
            .spec
            .as_mut()
            .unwrap()
            .containers
            .push(container("logger", &[])))),
        ["container set"]
    );
    assert_eq!(
        changes(fingerprint(|t| {
            app(t).image = Some("ruby-app:2".into());
            app(t).env = None;
        })),
        ["image", "env"]
    );
    // Anything else in the template counts too: nothing the user controls is left out.
    assert_eq!(
        changes(fingerprint(|t| {
            let meta = t.metadata.get_or_insert_with(Default::default);
            meta.annotations
                .get_or_insert_with(Default::default)
                .insert(
                    "kubectl.kubernetes.io/restartedAt".into(),
                    "2026-12-01T10:00:00Z".into(),
                );
        })),
        ["pod template"]
    );
    assert_eq!(
        changes(fingerprint(|t| *app(t) = Container {
            termination_message_path: Some("/tmp/log".into()),
            ..puma_2x6()
        })),
        ["pod template"]
    );
}

#[test]
fn a_bare_hash_still_compares() {
    let now = TemplateFingerprint::of(&template());
    let bare = TemplateFingerprint::parse("0123456789abcdef");
    assert!(bare.differs(&now));
    assert_eq!(bare.changes(&now), ["pod template"]);
    let same = TemplateFingerprint::parse(&format!("t={}", now.whole));
    assert!(!same.differs(&now));
}
