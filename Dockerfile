# The operator image for users with a registry. Build: docker build -t concurrency-operator .
# (This project's own CI has no Docker engine; its local cluster packs the same static binary
# with e2e/cluster/image.)
FROM rust:1.95-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl && apt-get update && apt-get install -y musl-tools
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target x86_64-unknown-linux-musl -p concurrency-operator \
 && cp target/x86_64-unknown-linux-musl/release/concurrency-operator /concurrency-operator

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
COPY --from=build /concurrency-operator /concurrency-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/concurrency-operator"]
CMD ["run"]
