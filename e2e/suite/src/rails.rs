//! The Rails app in the cluster (issue 27): server-images/rails — Rails 6.1 with ActiveRecord on
//! PostgreSQL 15 under Puma 5.6, the series yabeda-rails, yabeda-rack-queue, yabeda-puma-plugin
//! and yabeda-activerecord write, and with `gem` the concurrency-metrics gem's counters.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use serde_json::json;

use crate::{env_or, prometheus_in_cluster, Result, Scenario};

/// The Rails app's image (e2e/images with E2E_RAILS_APP=1).
pub fn rails_app_image() -> String {
    env_or("E2E_RAILS_APP_IMAGE", "rails-app:e2e")
}

/// PostgreSQL 15 on Debian (server-images/rails/rootfs/build-postgres.sh).
pub fn postgres_image() -> String {
    env_or("E2E_POSTGRES_IMAGE", "postgres:e2e")
}

/// How the Rails target runs.
#[derive(Debug, Clone)]
pub struct RailsTarget {
    pub workers: u32,
    pub threads: u32,
    /// `config/database.pinned.yml`: `pool: 5` whatever the threads.
    pub pinned_pool: bool,
    /// Load the concurrency-metrics gem (running, I/O and GVL-wait counters, DB pool wait).
    pub gem: bool,
    pub replicas: i32,
}

impl Default for RailsTarget {
    fn default() -> Self {
        RailsTarget {
            workers: 2,
            threads: 4,
            pinned_pool: false,
            gem: true,
            replicas: crate::REPLICAS,
        }
    }
}

impl Scenario {
    /// A PostgreSQL Deployment and its Service `postgres` (trust auth inside the namespace, data
    /// in an emptyDir); returns once it is ready.
    pub async fn deploy_postgres(&self) -> Result {
        self.create::<Deployment>(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "postgres"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "postgres"}},
                "template": {
                    "metadata": {"labels": {"app": "postgres"}},
                    "spec": {
                        // No POSTGRES_PORT=tcp://… from the Service of the same name.
                        "enableServiceLinks": false,
                        "terminationGracePeriodSeconds": 5,
                        "containers": [{
                            "name": "postgres",
                            "image": postgres_image(),
                            "imagePullPolicy": "Never",
                            "env": [{"name": "POSTGRES_HOST_AUTH", "value": "trust"}],
                            "ports": [{"name": "pg", "containerPort": 5432}],
                            "readinessProbe": {
                                "exec": {"command": ["/usr/lib/postgresql/15/bin/pg_isready", "-h", "127.0.0.1"]},
                                "periodSeconds": 2,
                                "timeoutSeconds": 3,
                            },
                            "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
                            "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql/data"}],
                        }],
                        "volumes": [{"name": "data", "emptyDir": {}}],
                    },
                },
            },
        }))
        .await?;
        self.create::<Service>(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "postgres"},
            "spec": {"selector": {"app": "postgres"}, "ports": [{"name": "pg", "port": 5432, "targetPort": "pg"}]},
        }))
        .await?;
        self.rollout("postgres", 120).await
    }

    /// The Rails app as `storefront` (Deployment and Service), scraped on its metrics port,
    /// against the namespace's `postgres`; returns once it is rolled out.
    pub async fn deploy_rails_target(&self, t: &RailsTarget) -> Result {
        let mut env = vec![
            json!({"name": "WEB_CONCURRENCY", "value": t.workers.to_string()}),
            json!({"name": "RAILS_MAX_THREADS", "value": t.threads.to_string()}),
            json!({"name": "PGHOST", "value": "postgres"}),
            json!({"name": "PGUSER", "value": "shop"}),
            json!({"name": "PGDATABASE", "value": "shop"}),
            json!({"name": "METRICS_PORT", "value": "9394"}),
            json!({"name": "RAILS_LOG_LEVEL", "value": "warn"}),
        ];
        if t.pinned_pool {
            env.push(json!({"name": "DATABASE_YML", "value": "pinned"}));
        }
        if t.gem {
            env.push(json!({"name": "CONCURRENCY_METRICS", "value": "1"}));
        }
        self.create::<Deployment>(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "storefront", "labels": {"app": "storefront"}},
            "spec": {
                "replicas": t.replicas,
                "selector": {"matchLabels": {"app": "storefront"}},
                "template": {
                    "metadata": {
                        "labels": {"app": "storefront"},
                        "annotations": {
                            "prometheus.io/scrape": "true",
                            "prometheus.io/port": "9394",
                            "prometheus.io/path": "/metrics",
                        },
                    },
                    "spec": {
                        "enableServiceLinks": false,
                        "terminationGracePeriodSeconds": 13,
                        "containers": [{
                            "name": "web",
                            "image": rails_app_image(),
                            "imagePullPolicy": "Never",
                            "ports": [{"name": "http", "containerPort": 3000}],
                            "env": env,
                            // Boot (Rails, the DB wait, migrations) takes ~10 s on a busy node.
                            "startupProbe": {
                                "httpGet": {"path": "/healthz", "port": "http"},
                                "periodSeconds": 2, "timeoutSeconds": 3, "failureThreshold": 60,
                            },
                            "readinessProbe": {
                                "httpGet": {"path": "/healthz", "port": "http"},
                                "periodSeconds": 1, "timeoutSeconds": 3,
                            },
                            // Puma finishes in-flight requests at SIGTERM; the preStop covers the
                            // endpoint's removal and the load's connection age.
                            "lifecycle": {"preStop": {"sleep": {"seconds": 8}}},
                            "resources": {
                                "requests": {"cpu": "10m", "memory": "64Mi"},
                                "limits": {"memory": "640Mi"},
                            },
                        }],
                    },
                },
            },
        }))
        .await?;
        self.create::<Service>(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "storefront"},
            "spec": {"selector": {"app": "storefront"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
        }))
        .await?;
        self.rollout("storefront", 240).await
    }
}

/// README's first experiment, as a user copies it: the YAML block under "## Your first
/// experiment", with only `analysis.prometheus.url` set to the cluster's Prometheus. Read from
/// README.md at run time, so the scenario that applies it cannot drift from what users read.
pub fn readme_first_experiment() -> Result<serde_json::Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let readme = std::fs::read_to_string(path)?;
    let section = readme
        .split_once("\n## Your first experiment\n")
        .map(|(_, rest)| rest)
        .ok_or_else(|| anyhow::anyhow!("README.md has no section \"Your first experiment\""))?;
    let block = section
        .split_once("```yaml\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(yaml, _)| yaml)
        .ok_or_else(|| anyhow::anyhow!("README's first experiment has no ```yaml block"))?;
    let mut doc: serde_json::Value = serde_yaml::from_str(block)?;
    let url = doc
        .pointer_mut("/spec/analysis/prometheus/url")
        .ok_or_else(|| anyhow::anyhow!("README's manifest names no Prometheus URL"))?;
    *url = json!(prometheus_in_cluster());
    Ok(doc)
}

impl Scenario {
    /// The Rails app twice, side by side, each on its own PostgreSQL: here with the
    /// concurrency-metrics gem, and in a second namespace (`<ns>-std`, returned) without it —
    /// an app with yabeda's series only, as most Rails teams have: no GVL, I/O-wait or pool
    /// counters. [`Scenario::discard`] removes the second one.
    pub async fn rails_with_and_without_gem(&self, t: &RailsTarget) -> Result<Scenario> {
        let std = Scenario::in_namespace(&self.name, &format!("{}-std", self.ns)).await?;
        let with = RailsTarget {
            gem: true,
            ..t.clone()
        };
        let without = RailsTarget {
            gem: false,
            ..t.clone()
        };
        let deployed = tokio::try_join!(
            async {
                self.deploy_postgres().await?;
                self.deploy_rails_target(&with).await
            },
            async {
                std.deploy_postgres().await?;
                std.deploy_rails_target(&without).await
            },
        );
        if let Err(e) = deployed {
            std.discard().await;
            return Err(e);
        }
        Ok(std)
    }

    /// A second namespace of a scenario done with: its load stopped, the namespace deleted.
    pub async fn discard(&self) {
        self.stop_load().await;
        self.remove_namespace().await;
    }
}
