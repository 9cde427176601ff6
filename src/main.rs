fn main() {
    print!("{}", concurrency_operator::api::crd_yaml().expect("crd"));
}
