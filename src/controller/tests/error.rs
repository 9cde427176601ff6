use crate::controller::error::*;

fn api(code: u16) -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure("nope", "Reason")
            .with_code(code)
            .boxed(),
    )
}

#[test]
fn categories_name_the_api_failure() {
    assert_eq!(Error::from(api(409)).category(), "ApiConflict");
    assert_eq!(Error::from(api(403)).category(), "ApiForbidden");
    assert_eq!(Error::from(api(500)).category(), "KubeApi");
    assert!(is_not_found(&api(404)));
    assert!(!is_not_found(&api(409)));
    assert!(is_conflict(&api(409)));
    assert_eq!(
        Error::TargetMissing { action: "scale" }.to_string(),
        "cannot scale without the target Deployment"
    );
}
