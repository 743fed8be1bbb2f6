//! The exporter's batching (`OTEL_BSP_*`) and the head sampler (`OTEL_TRACES_SAMPLER`), read
//! from the environment with the OpenTelemetry SDK's names and defaults.

use std::time::Duration;

/// Batching, as the OpenTelemetry batch processor's environment variables set it.
#[derive(Clone, Copy, Debug)]
pub struct Batching {
    pub queue: usize,
    pub batch: usize,
    pub delay: Duration,
}

impl Batching {
    /// From `OTEL_BSP_*`, with the SDK's defaults (2048, 512, 5 s) for what is unset or invalid.
    pub fn from_env() -> Self {
        let read = |name: &str, default: u64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        let queue = usize::try_from(read("OTEL_BSP_MAX_QUEUE_SIZE", 2048)).unwrap_or(2048);
        let batch = usize::try_from(read("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)).unwrap_or(512);
        Batching {
            queue,
            batch: batch.min(queue),
            delay: Duration::from_millis(read("OTEL_BSP_SCHEDULE_DELAY", 5000)),
        }
    }
}

/// Which traces are recorded, as `OTEL_TRACES_SAMPLER` (and `OTEL_TRACES_SAMPLER_ARG`, the
/// ratio) name it: `always_on`, `always_off`, `traceidratio`, and their `parentbased_` forms,
/// which follow a remote caller's decision. The default is `parentbased_always_on`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampler {
    /// The share of new traces recorded, 0 to 1.
    pub ratio: f64,
    /// Whether a remote parent's decision wins over the ratio.
    pub parent_based: bool,
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler {
            ratio: 1.0,
            parent_based: true,
        }
    }
}

impl Sampler {
    /// From `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` as `env` reads them; an
    /// unknown sampler or a ratio outside 0..=1 is an error: `(variable, message)`.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, (&'static str, String)> {
        let name = env("OTEL_TRACES_SAMPLER").unwrap_or_default();
        let arg = env("OTEL_TRACES_SAMPLER_ARG");
        Self::parse(name.trim(), arg.as_deref().map(str::trim))
    }

    pub(super) fn parse(name: &str, arg: Option<&str>) -> Result<Self, (&'static str, String)> {
        let ratio = || match arg {
            None | Some("") => Ok(1.0),
            Some(a) => match a.parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
                _ => Err((
                    "OTEL_TRACES_SAMPLER_ARG",
                    format!("`{a}` is not a ratio between 0 and 1"),
                )),
            },
        };
        let (ratio, parent_based) = match name {
            "" | "parentbased_always_on" => (1.0, true),
            "always_on" => (1.0, false),
            "always_off" => (0.0, false),
            "parentbased_always_off" => (0.0, true),
            "traceidratio" => (ratio()?, false),
            "parentbased_traceidratio" => (ratio()?, true),
            other => {
                return Err((
                    "OTEL_TRACES_SAMPLER",
                    format!(
                        "`{other}` is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio"
                    ),
                ));
            }
        };
        Ok(Sampler {
            ratio,
            parent_based,
        })
    }

    /// How `toolbridge check` names it.
    pub fn describe(&self) -> String {
        let base = match self.ratio {
            r if r >= 1.0 => "always_on".to_owned(),
            r if r <= 0.0 => "always_off".to_owned(),
            r => format!("traceidratio {r}"),
        };
        if self.parent_based {
            format!("parentbased_{base}")
        } else {
            base
        }
    }

    /// The decision for a new trace: the OpenTelemetry ratio rule on the trace id's low 63 bits,
    /// so every service sampling by the same ratio keeps the same traces.
    pub(super) fn samples(&self, trace_id: u128) -> bool {
        if self.ratio >= 1.0 {
            return true;
        }
        // Truncation is the rule: the bound is ratio × 2^63, as an integer.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let bound = (self.ratio * (1u64 << 63) as f64) as u64;
        #[allow(clippy::cast_possible_truncation)]
        let low = (trace_id as u64) >> 1;
        low < bound
    }
}
