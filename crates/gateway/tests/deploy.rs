//! The scale-out reference (`deploy/compose.yaml`, `deploy/nginx.conf`, `deploy/prometheus.yml`),
//! checked by parsing: no container engine runs here. Two gateways share one PostgreSQL and one
//! Redis, every service has a health check, nginx balances over both gateways without
//! buffering streams and keeps `/metrics` inside, Prometheus scrapes both gateways at the path
//! their config serves, and their spans go to Jaeger over OTLP/HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Compose {
    services: BTreeMap<String, Service>,
}

#[derive(Debug, Deserialize)]
struct Service {
    image: Option<String>,
    build: Option<serde_json::Value>,
    command: Option<Vec<String>>,
    #[serde(default)]
    environment: BTreeMap<String, String>,
    healthcheck: Option<Healthcheck>,
    #[serde(default)]
    depends_on: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    volumes: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Healthcheck {
    test: Vec<String>,
}

fn deploy(file: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn compose_runs_two_gateways_on_one_postgres_and_one_redis_behind_nginx() {
    let compose: Compose = serde_saphyr::from_str(&deploy("compose.yaml")).unwrap();
    let names: Vec<&str> = compose.services.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "gateway-1",
            "gateway-2",
            "jaeger",
            "nginx",
            "postgres",
            "prometheus",
            "redis"
        ]
    );

    let gateways = [
        &compose.services["gateway-1"],
        &compose.services["gateway-2"],
    ];
    let store = &gateways[0].environment["TOOLBRIDGE_STORE_URL"];
    let redis = &gateways[0].environment["TOOLBRIDGE_REDIS_URL"];
    assert!(
        store.starts_with("postgres://") && store.contains("@postgres:5432/"),
        "{store}"
    );
    assert_eq!(redis, "redis://redis:6379");
    for g in gateways {
        assert_eq!(
            &g.environment["TOOLBRIDGE_STORE_URL"], store,
            "one store for both"
        );
        assert_eq!(
            &g.environment["TOOLBRIDGE_REDIS_URL"], redis,
            "one Redis for both"
        );
        assert_eq!(g.environment["TOOLBRIDGE_LISTEN"], "0.0.0.0:8080");
        // Traces go to the Jaeger service's OTLP/HTTP port.
        assert_eq!(
            g.environment["OTEL_EXPORTER_OTLP_ENDPOINT"],
            "http://jaeger:4318"
        );
        assert!(g.depends_on.contains_key("jaeger"));
        assert!(g.build.is_some(), "built from the Dockerfile");
        assert_eq!(g.command.as_deref().unwrap()[0], "serve");
        let test = &g.healthcheck.as_ref().expect("gateway healthcheck").test;
        assert!(test.iter().any(|t| t.ends_with("/healthz")), "{test:?}");
        assert!(g.depends_on.contains_key("postgres") && g.depends_on.contains_key("redis"));
        // The config the gateway is told to read is the one mounted.
        let config = g.command.as_deref().unwrap().last().unwrap();
        assert!(
            g.volumes
                .iter()
                .any(|v| v.ends_with(&format!("{config}:ro"))),
            "{:?}",
            g.volumes
        );
    }
    for (name, service) in &compose.services {
        assert!(service.healthcheck.is_some(), "{name} has a healthcheck");
    }
    let nginx = &compose.services["nginx"];
    assert!(nginx.image.as_deref().unwrap().starts_with("nginx:"));
    assert!(nginx.volumes.iter().any(|v| v.starts_with("./nginx.conf:")));
    assert!(
        nginx.depends_on.contains_key("gateway-1") && nginx.depends_on.contains_key("gateway-2")
    );
    assert!(
        compose.services["postgres"]
            .image
            .as_deref()
            .unwrap()
            .starts_with("postgres:")
    );
    assert!(
        compose.services["redis"]
            .image
            .as_deref()
            .unwrap()
            .starts_with("redis:")
    );
    let jaeger = &compose.services["jaeger"];
    assert!(
        jaeger
            .image
            .as_deref()
            .unwrap()
            .starts_with("jaegertracing/")
    );
    let prometheus = &compose.services["prometheus"];
    assert!(
        prometheus
            .image
            .as_deref()
            .unwrap()
            .starts_with("prom/prometheus:")
    );
    assert!(
        prometheus
            .volumes
            .iter()
            .any(|v| v.starts_with("./prometheus.yml:/etc/prometheus/prometheus.yml")),
        "{:?}",
        prometheus.volumes
    );
}

#[derive(Debug, Deserialize)]
struct PrometheusConfig {
    scrape_configs: Vec<ScrapeConfig>,
}

#[derive(Debug, Deserialize)]
struct ScrapeConfig {
    metrics_path: String,
    static_configs: Vec<StaticConfig>,
}

#[derive(Debug, Deserialize)]
struct StaticConfig {
    targets: Vec<String>,
}

#[test]
fn prometheus_scrapes_both_gateways_where_they_serve_metrics() {
    let prometheus: PrometheusConfig = serde_saphyr::from_str(&deploy("prometheus.yml")).unwrap();
    let [scrape] = prometheus.scrape_configs.as_slice() else {
        panic!("one scrape job: {prometheus:?}");
    };
    // The path the gateways' config serves metrics on.
    let file: toolbridge_gateway::config::FileConfig =
        toml::from_str(&deploy("toolbridge.toml")).unwrap();
    let env = |k: &str| (k == "TOOLBRIDGE_STORE_URL").then(|| "none".to_owned());
    let config = toolbridge_gateway::config::Config::from_file(file, &env).unwrap();
    assert!(config.ops.metrics.enabled);
    assert_eq!(scrape.metrics_path, config.ops.metrics.path);
    let targets: Vec<&str> = scrape
        .static_configs
        .iter()
        .flat_map(|c| &c.targets)
        .map(String::as_str)
        .collect();
    assert_eq!(targets, ["gateway-1:8080", "gateway-2:8080"]);
}

#[test]
fn the_mounted_gateway_config_is_valid() {
    let text = deploy("toolbridge.toml");
    let file: toolbridge_gateway::config::FileConfig = toml::from_str(&text).unwrap();
    let env = |k: &str| match k {
        "TOOLBRIDGE_STORE_URL" => {
            Some("postgres://toolbridge:toolbridge@postgres:5432/toolbridge".to_owned())
        }
        "TOOLBRIDGE_REDIS_URL" => Some("redis://redis:6379".to_owned()),
        _ => None,
    };
    let config = toolbridge_gateway::config::Config::from_file(file, &env).unwrap();
    assert!(config.require_keys);
    assert_eq!(
        config.limits.redis_url.as_deref(),
        Some("redis://redis:6379")
    );
}

#[test]
fn nginx_proxies_to_both_gateways_without_buffering() {
    let conf = deploy("nginx.conf");
    // Directives only, comments dropped.
    let lines: Vec<&str> = conf
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect();
    let has = |directive: &str| lines.contains(&directive);
    assert!(has("server gateway-1:8080 max_fails=3 fail_timeout=10s;"));
    assert!(has("server gateway-2:8080 max_fails=3 fail_timeout=10s;"));
    assert!(has("proxy_pass http://toolbridge;"));
    assert!(has("upstream toolbridge {"));
    assert!(has("proxy_buffering off;"));
    assert!(has("proxy_request_buffering off;"));
    assert!(has("proxy_http_version 1.1;"));
    // Unauthenticated metrics stay on the internal network.
    assert!(has("location = /metrics {") && has("return 404;"));
    let read_timeout = lines
        .iter()
        .find_map(|l| l.strip_prefix("proxy_read_timeout "))
        .expect("proxy_read_timeout");
    let secs: u64 = read_timeout
        .trim_end_matches(';')
        .trim_end_matches('s')
        .parse()
        .unwrap();
    assert!(secs >= 3600, "streams may last an hour: {secs}");
}

#[test]
fn the_dockerfile_is_multi_stage_non_root_and_health_checked() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../Dockerfile");
    let text = std::fs::read_to_string(path).unwrap();
    let from: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(from.len(), 2, "{from:?}");
    assert!(from[0].contains(" AS build"));
    assert!(text.contains("cargo build --release"));
    assert!(text.lines().any(|l| l.starts_with("USER nonroot")));
    assert!(text.lines().any(|l| l.starts_with("HEALTHCHECK")) && text.contains("/healthz"));
    assert!(text.lines().any(|l| l.starts_with("EXPOSE 8080")));
}
