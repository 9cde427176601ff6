//! The krew manifest in plugins/ is well-formed and follows the release naming convention,
//! and its version is the crate's (a release bump that forgets it fails here).

use serde_yaml::Value;

fn manifest() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/plugins/concurrency.yaml");
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for key in path {
        cur = &cur[*key];
    }
    cur.as_str()
        .unwrap_or_else(|| panic!("{} is not a string", path.join(".")))
}

#[test]
fn krew_manifest_is_a_plugin_for_this_binary_and_version() {
    let m = manifest();
    assert_eq!(
        str_at(&m, &["apiVersion"]),
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(str_at(&m, &["kind"]), "Plugin");
    // `kubectl concurrency` runs the binary `kubectl-concurrency`.
    assert_eq!(str_at(&m, &["metadata", "name"]), "concurrency");
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(str_at(&m, &["spec", "version"]), version);
    assert!(str_at(&m, &["spec", "shortDescription"]).len() <= 50);
    let platforms = m["spec"]["platforms"].as_sequence().unwrap();
    let mut seen = Vec::new();
    for p in platforms {
        let labels = &p["selector"]["matchLabels"];
        let (os, arch) = (str_at(labels, &["os"]), str_at(labels, &["arch"]));
        let target = match (os, arch) {
            ("linux", "amd64") => "x86_64-unknown-linux-musl",
            ("linux", "arm64") => "aarch64-unknown-linux-musl",
            ("darwin", "amd64") => "x86_64-apple-darwin",
            ("darwin", "arm64") => "aarch64-apple-darwin",
            other => panic!("unexpected platform {other:?}"),
        };
        assert_eq!(
            str_at(p, &["uri"]),
            format!(
                "https://github.com/OWNER/concurrency-operator/releases/download/{version}/kubectl-concurrency-{version}-{target}.tar.gz"
            )
        );
        let sha = str_at(p, &["sha256"]);
        assert!(
            sha.len() == 64 && sha.chars().all(|c| c.is_ascii_hexdigit()),
            "{sha}"
        );
        assert_eq!(str_at(p, &["bin"]), "kubectl-concurrency");
        assert_eq!(str_at(&p["files"][0], &["from"]), "kubectl-concurrency");
        seen.push((os, arch));
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), platforms.len(), "a platform listed twice");
}
