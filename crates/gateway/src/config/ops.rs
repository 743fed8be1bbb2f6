//! The operations sections of the config file — `[metrics]`, `[telemetry]`, `[logging]` and
//! `[capture]` — as written and as resolved. Everything that can be wrong (a metrics path that
//! shadows the API, an endpoint that is not a URL, capture without a store) is refused at load,
//! so `toolbridge check` and a SIGHUP reload catch it before it applies.

use std::time::Duration;

use serde::Deserialize;

use super::Env;
use crate::error::ConfigError;

/// `[metrics]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsFile {
    /// Serve Prometheus metrics (default true).
    pub enabled: Option<bool>,
    /// Where (default `/metrics`).
    pub path: Option<String>,
}

/// `[telemetry]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryFile {
    /// The OTLP/HTTP collector, e.g. `http://127.0.0.1:4318` (`/v1/traces` is added). Default:
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`; neither: no traces are exported.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the spans (default `toolbridge`, or `OTEL_SERVICE_NAME`).
    pub service_name: Option<String>,
    /// Record message content (prompts, completions, tool arguments and results) on the GenAI
    /// spans (default false, or `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
    pub capture_content: Option<bool>,
}

/// `[logging]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoggingFile {
    /// `text` (default) or `json`; `TOOLBRIDGE_LOG_FORMAT` wins.
    pub format: Option<String>,
}

/// `[capture]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureFile {
    /// Capture every `/v1/responses` request into the store (default false).
    pub enabled: Option<bool>,
    /// The most bytes kept of each part of a capture (default 1 MiB).
    pub max_bytes: Option<usize>,
    /// How long a capture is kept (default 86 400 s).
    pub ttl_secs: Option<u64>,
}

/// The resolved operations settings.
#[derive(Debug, Clone, PartialEq)]
pub struct OpsConfig {
    pub metrics: MetricsConfig,
    pub telemetry: TelemetryConfig,
    pub log_format: LogFormat,
    pub capture: CaptureConfig,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    pub enabled: bool,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    /// The full traces URL (`…/v1/traces`); `None`: tracing stays local.
    pub traces_url: Option<String>,
    pub service_name: String,
    /// Head sampling, from `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`.
    pub sampler: crate::platform::ops::spans::Sampler,
    /// Whether the GenAI spans carry message content (the conventions' opt-in).
    pub capture_content: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureConfig {
    pub enabled: bool,
    pub max_bytes: usize,
    pub ttl: Duration,
}

/// The default capture part cap.
pub const DEFAULT_CAPTURE_BYTES: usize = 1024 * 1024;
/// The largest capture part cap accepted.
pub const MAX_CAPTURE_BYTES: usize = 64 * 1024 * 1024;

impl Default for OpsConfig {
    fn default() -> Self {
        Self {
            metrics: MetricsConfig {
                enabled: true,
                path: "/metrics".to_owned(),
            },
            telemetry: TelemetryConfig {
                traces_url: None,
                service_name: "toolbridge".to_owned(),
                sampler: crate::platform::ops::spans::Sampler::default(),
                capture_content: false,
            },
            log_format: LogFormat::Text,
            capture: CaptureConfig {
                enabled: false,
                max_bytes: DEFAULT_CAPTURE_BYTES,
                ttl: Duration::from_secs(86_400),
            },
        }
    }
}

impl LogFormat {
    /// Reads `text` or `json`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "text" => Some(Self::Text),
            "json" => Some(Self::Json),
            _ => None,
        }
    }
}

/// The sections a config file may carry.
pub struct OpsFiles<'a> {
    pub metrics: &'a MetricsFile,
    pub telemetry: &'a TelemetryFile,
    pub logging: &'a LoggingFile,
    pub capture: &'a CaptureFile,
}

impl OpsConfig {
    /// Validates the operations sections; `has_store` says whether a store is configured
    /// (capture writes there).
    pub fn resolve(
        files: OpsFiles<'_>,
        has_store: bool,
        env: Env<'_>,
    ) -> Result<Self, ConfigError> {
        let defaults = Self::default();
        let path = metrics_path(files.metrics, defaults.metrics.path)?;
        let traces_url = traces_url(files.telemetry, env)?;
        let service_name = files
            .telemetry
            .service_name
            .clone()
            .or_else(|| env("OTEL_SERVICE_NAME"))
            .unwrap_or(defaults.telemetry.service_name);
        let sampler = crate::platform::ops::spans::Sampler::from_env(env)
            .map_err(|(variable, message)| ConfigError::invalid(variable, message))?;
        let capture_content = files.telemetry.capture_content.unwrap_or_else(|| {
            env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        });
        let format_text = env("TOOLBRIDGE_LOG_FORMAT").or_else(|| files.logging.format.clone());
        let log_format = match format_text {
            None => LogFormat::Text,
            Some(text) => LogFormat::parse(&text).ok_or_else(|| {
                ConfigError::invalid(
                    "logging.format",
                    format!("`{text}` is neither `text` nor `json`"),
                )
            })?,
        };
        Ok(Self {
            metrics: MetricsConfig {
                enabled: files.metrics.enabled.unwrap_or(true),
                path,
            },
            telemetry: TelemetryConfig {
                traces_url,
                service_name,
                sampler,
                capture_content,
            },
            log_format,
            capture: capture(files.capture, has_store)?,
        })
    }

    /// What `toolbridge check` prints about these sections.
    pub fn describe(&self) -> String {
        let metrics = if self.metrics.enabled {
            format!("{} (Prometheus, unauthenticated)", self.metrics.path)
        } else {
            "off".to_owned()
        };
        let traces = match &self.telemetry.traces_url {
            Some(url) => format!(
                "OTLP/HTTP to {} as `{}`, sampler {}, message content {}",
                super::redact_url(url),
                self.telemetry.service_name,
                self.telemetry.sampler.describe(),
                if self.telemetry.capture_content {
                    "recorded"
                } else {
                    "not recorded"
                }
            ),
            None => "off (no otlp_endpoint)".to_owned(),
        };
        let capture = if self.capture.enabled {
            format!(
                "on, {} bytes per part, kept {} s",
                self.capture.max_bytes,
                self.capture.ttl.as_secs()
            )
        } else {
            "off".to_owned()
        };
        format!(
            "metrics: {metrics}\ntraces: {traces}\nlogs: {}\nrequest capture: {capture}\n",
            match self.log_format {
                LogFormat::Text => "text",
                LogFormat::Json => "json",
            }
        )
    }
}

/// The metrics path `metrics` gives (else `default`), refused when it is not absolute, shadows
/// the API or the health check, or holds a route pattern's characters.
fn metrics_path(metrics: &MetricsFile, default: String) -> Result<String, ConfigError> {
    let path = metrics.path.clone().unwrap_or(default);
    let reserved = path == "/healthz" || path == "/v1" || path.starts_with("/v1/");
    if !path.starts_with('/') || path.len() < 2 || reserved || path.contains(['{', '}', '*']) {
        return Err(ConfigError::invalid(
            "metrics.path",
            format!(
                "`{path}` must be an absolute path such as `/metrics`, outside `/v1` and `/healthz`, without `{{` `}}` `*`"
            ),
        ));
    }
    Ok(path)
}

/// The full traces URL (`…/v1/traces`, added once) of the OTLP/HTTP endpoint `telemetry` or
/// `OTEL_EXPORTER_OTLP_ENDPOINT` names; `None` when neither does. Refused when it is not an
/// http:// or https:// URL.
fn traces_url(telemetry: &TelemetryFile, env: Env<'_>) -> Result<Option<String>, ConfigError> {
    let endpoint = telemetry
        .otlp_endpoint
        .clone()
        .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .filter(|e| !e.trim().is_empty());
    let Some(endpoint) = endpoint else {
        return Ok(None);
    };
    let parsed = url::Url::parse(endpoint.trim()).map_err(|e| {
        ConfigError::invalid("telemetry.otlp_endpoint", format!("`{endpoint}`: {e}"))
    })?;
    if parsed.scheme() != "http" && parsed.scheme() != "https" {
        return Err(ConfigError::invalid(
            "telemetry.otlp_endpoint",
            format!("`{endpoint}` must be an http:// or https:// URL (OTLP/HTTP)"),
        ));
    }
    let base = endpoint.trim().trim_end_matches('/');
    Ok(Some(if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }))
}

/// `[capture]` resolved; `has_store` says whether a store is configured (capture writes there).
/// Refused when capture is on without a store, or a bound is out of range.
fn capture(capture: &CaptureFile, has_store: bool) -> Result<CaptureConfig, ConfigError> {
    let enabled = capture.enabled.unwrap_or(false);
    if enabled && !has_store {
        return Err(ConfigError::invalid(
            "capture.enabled",
            "request capture writes to the store: set `store_url` (or turn capture off)",
        ));
    }
    let max_bytes = capture.max_bytes.unwrap_or(DEFAULT_CAPTURE_BYTES);
    if max_bytes == 0 || max_bytes > MAX_CAPTURE_BYTES {
        return Err(ConfigError::invalid(
            "capture.max_bytes",
            format!("must be between 1 and {MAX_CAPTURE_BYTES}"),
        ));
    }
    let ttl_secs = capture.ttl_secs.unwrap_or(86_400);
    if ttl_secs == 0 {
        return Err(ConfigError::invalid(
            "capture.ttl_secs",
            "must be at least 1",
        ));
    }
    Ok(CaptureConfig {
        enabled,
        max_bytes,
        ttl: Duration::from_secs(ttl_secs),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(
        metrics: MetricsFile,
        telemetry: TelemetryFile,
        capture: CaptureFile,
        has_store: bool,
    ) -> Result<OpsConfig, ConfigError> {
        let env = |_: &str| None;
        OpsConfig::resolve(
            OpsFiles {
                metrics: &metrics,
                telemetry: &telemetry,
                logging: &LoggingFile::default(),
                capture: &capture,
            },
            has_store,
            &env,
        )
    }

    #[test]
    fn defaults_serve_metrics_and_nothing_else() {
        let ops = resolve(
            MetricsFile::default(),
            TelemetryFile::default(),
            CaptureFile::default(),
            false,
        )
        .unwrap();
        assert_eq!(ops, OpsConfig::default());
    }

    #[test]
    fn bad_sections_are_refused_with_their_field() {
        let shadowing = MetricsFile {
            path: Some("/v1/responses".into()),
            ..Default::default()
        };
        let e = resolve(
            shadowing,
            TelemetryFile::default(),
            CaptureFile::default(),
            false,
        );
        assert!(e.unwrap_err().to_string().contains("metrics.path"));
        let grpc = TelemetryFile {
            otlp_endpoint: Some("grpc://collector:4317".into()),
            ..Default::default()
        };
        let e = resolve(MetricsFile::default(), grpc, CaptureFile::default(), false);
        assert!(e.unwrap_err().to_string().contains("otlp_endpoint"));
        let capture = CaptureFile {
            enabled: Some(true),
            ..Default::default()
        };
        let e = resolve(
            MetricsFile::default(),
            TelemetryFile::default(),
            capture,
            false,
        );
        assert!(e.unwrap_err().to_string().contains("store_url"));
    }

    #[test]
    fn the_traces_path_is_added_once() {
        for endpoint in ["http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"] {
            let telemetry = TelemetryFile {
                otlp_endpoint: Some(endpoint.into()),
                ..Default::default()
            };
            let ops = resolve(
                MetricsFile::default(),
                telemetry,
                CaptureFile::default(),
                false,
            )
            .unwrap();
            assert_eq!(
                ops.telemetry.traces_url.as_deref(),
                Some("http://127.0.0.1:4318/v1/traces")
            );
        }
    }
}
