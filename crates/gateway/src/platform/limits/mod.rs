//! Rate limits: requests and tokens per minute, per gateway key and per upstream provider.
//!
//! In process by default: requests through governor's GCRA (a keyed limiter for keys, one
//! limiter per provider), tokens in a one-minute window per key and per provider. With
//! `[limits] redis_url` every count lives in Redis instead, so all gateway processes share
//! them: a fixed window per counter that starts at its first use and lasts a minute (one Lua
//! script: `INCR`, then `PEXPIRE` on the first hit, answering the count and the time left),
//! so no two processes need agreeing clocks.
//!
//! A request refused answers 429 `rate_limit_exceeded` with `Retry-After`. Tokens are counted
//! after a response (its usage) and checked before the next: the request that crosses the line
//! finishes. When Redis cannot be reached the limits fail open (the request is served, a warning
//! logged): the gateway's availability does not hang on its limiter.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::error::GatewayError;

mod config;

pub(crate) use config::{LimitsConfig, LimitsFile};

/// The key name requests without a gateway key are counted under.
pub(crate) const ANONYMOUS: &str = "-";
/// The window of every limit.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);
/// How long one Redis round trip may take before the limit fails open.
const REDIS_TIMEOUT: Duration = Duration::from_millis(500);
/// Past this many tracked keys, forgotten ones are dropped.
const MAX_TRACKED: usize = 10_000;

/// What a counter is for, in errors and Redis key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Subject {
    Key,
    Provider,
}

impl Subject {
    fn word(self) -> &'static str {
        match self {
            Self::Key => "key",
            Self::Provider => "provider",
        }
    }
}

/// The limiter of one process.
pub(crate) struct Limits {
    config: LimitsConfig,
    backend: Backend,
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limits")
            .field("shared", &matches!(self.backend, Backend::Redis(_)))
            .finish_non_exhaustive()
    }
}

enum Backend {
    Local(Box<Local>),
    Redis(redis::aio::ConnectionManager),
}

struct Local {
    keys: Option<DefaultKeyedRateLimiter<String>>,
    providers: HashMap<String, DefaultDirectRateLimiter>,
    tokens: Mutex<TokenWindows>,
    /// Requests checked against `keys`.
    checks: AtomicU64,
}

/// Tokens used in the current one-minute window (its start and the count), per key id and per
/// provider; looked up by `&str`, so a check allocates nothing.
#[derive(Default)]
struct TokenWindows {
    keys: HashMap<String, (Instant, u64)>,
    providers: HashMap<String, (Instant, u64)>,
}

impl TokenWindows {
    fn of(&mut self, subject: Subject) -> &mut HashMap<String, (Instant, u64)> {
        match subject {
            Subject::Key => &mut self.keys,
            Subject::Provider => &mut self.providers,
        }
    }
}

/// Adds `ARGV[2]` to a counter, the window (`ARGV[1]` ms) set on the first hit; answers
/// `{count, ms left}`.
const HIT: &str = r"
local n = redis.call('INCRBY', KEYS[1], ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}
";

/// Reads a counter: `{count, ms left}` (0 and 0 when absent).
const PEEK: &str = r"
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = 0 end
return {n, ttl}
";

impl Limits {
    /// The limiter for `config`. A Redis connection is made lazily, on first use.
    pub(crate) fn new(config: LimitsConfig) -> Result<Self, String> {
        let backend = match &config.redis_url {
            Some(url) => {
                let client = redis::Client::open(url.as_str())
                    .map_err(|e| format!("not a usable Redis URL: {e}"))?;
                let manager_config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(REDIS_TIMEOUT))
                    .set_response_timeout(Some(REDIS_TIMEOUT))
                    .set_number_of_retries(1);
                let manager =
                    redis::aio::ConnectionManager::new_lazy_with_config(client, manager_config)
                        .map_err(|e| format!("cannot set up the Redis connection: {e}"))?;
                Backend::Redis(manager)
            }
            None => Backend::Local(Box::new(Local {
                keys: config
                    .key_requests_per_minute
                    .map(|n| RateLimiter::keyed(Quota::per_minute(n))),
                providers: config
                    .providers
                    .iter()
                    .filter_map(|(name, p)| {
                        p.requests_per_minute
                            .map(|n| (name.clone(), RateLimiter::direct(Quota::per_minute(n))))
                    })
                    .collect(),
                tokens: Mutex::default(),
                checks: AtomicU64::new(0),
            })),
        };
        Ok(Self { config, backend })
    }

    /// Before a request of key `key` (its id, or [`ANONYMOUS`]): counts it against the key's
    /// requests per minute and checks the key's tokens per minute.
    pub(crate) async fn check_request(&self, key: &str) -> Result<(), GatewayError> {
        self.check_tokens(Subject::Key, key, self.config.key_tokens_per_minute)
            .await?;
        let Some(limit) = self.config.key_requests_per_minute else {
            return Ok(());
        };
        match &self.backend {
            Backend::Local(local) => {
                let Some(limiter) = &local.keys else {
                    return Ok(());
                };
                // Counting the tracked keys reads every shard: only every 1024th request.
                if local.checks.fetch_add(1, Ordering::Relaxed) % 1024 == 0
                    && limiter.len() > MAX_TRACKED
                {
                    limiter.retain_recent();
                }
                limiter.check_key(&key.to_owned()).map_err(|not_until| {
                    let wait = not_until.wait_time_from(DefaultClock::default().now());
                    refused(Subject::Key, key, "requests", u64::from(limit.get()), wait)
                })
            }
            Backend::Redis(manager) => {
                self.redis_hit(
                    manager,
                    Subject::Key,
                    key,
                    "requests",
                    u64::from(limit.get()),
                    1,
                )
                .await
            }
        }
    }

    /// Before sending to `provider`: counts the request against its requests per minute and
    /// checks its tokens per minute.
    pub(crate) async fn check_upstream(&self, provider: &str) -> Result<(), GatewayError> {
        let Some(limits) = self.config.providers.get(provider).copied() else {
            return Ok(());
        };
        self.check_tokens(Subject::Provider, provider, limits.tokens_per_minute)
            .await?;
        let Some(limit) = limits.requests_per_minute else {
            return Ok(());
        };
        match &self.backend {
            Backend::Local(local) => match local.providers.get(provider) {
                Some(limiter) => limiter.check().map_err(|not_until| {
                    let wait = not_until.wait_time_from(DefaultClock::default().now());
                    refused(
                        Subject::Provider,
                        provider,
                        "requests",
                        u64::from(limit.get()),
                        wait,
                    )
                }),
                None => Ok(()),
            },
            Backend::Redis(manager) => {
                self.redis_hit(
                    manager,
                    Subject::Provider,
                    provider,
                    "requests",
                    u64::from(limit.get()),
                    1,
                )
                .await
            }
        }
    }

    /// After a response: adds its `tokens` to the windows of `key` and `provider`.
    pub(crate) async fn record_tokens(&self, key: &str, provider: &str, tokens: u64) {
        if tokens == 0 {
            return;
        }
        if self.config.key_tokens_per_minute.is_some() {
            self.add_tokens(Subject::Key, key, tokens).await;
        }
        if self
            .config
            .providers
            .get(provider)
            .is_some_and(|p| p.tokens_per_minute.is_some())
        {
            self.add_tokens(Subject::Provider, provider, tokens).await;
        }
    }

    async fn check_tokens(
        &self,
        subject: Subject,
        id: &str,
        limit: Option<u64>,
    ) -> Result<(), GatewayError> {
        let Some(limit) = limit else {
            return Ok(());
        };
        let (used, left) = match &self.backend {
            Backend::Local(local) => {
                let Ok(mut windows) = local.tokens.lock() else {
                    return Ok(());
                };
                match windows.of(subject).get(id) {
                    Some((start, used)) if start.elapsed() < WINDOW => {
                        (*used, WINDOW.saturating_sub(start.elapsed()))
                    }
                    _ => (0, Duration::ZERO),
                }
            }
            Backend::Redis(manager) => {
                let script = redis::Script::new(PEEK);
                let mut conn = manager.clone();
                let key = self.redis_key(subject, id, "tokens");
                let answer = tokio::time::timeout(
                    REDIS_TIMEOUT,
                    script.key(&key).invoke_async::<(u64, u64)>(&mut conn),
                )
                .await;
                match answer {
                    Ok(Ok((used, ms))) => (used, Duration::from_millis(ms)),
                    Ok(Err(e)) => return fail_open(&e.to_string()),
                    Err(_) => return fail_open("timed out"),
                }
            }
        };
        if used >= limit {
            return Err(refused(subject, id, "tokens", limit, left));
        }
        Ok(())
    }

    async fn add_tokens(&self, subject: Subject, id: &str, tokens: u64) {
        match &self.backend {
            Backend::Local(local) => {
                if let Ok(mut windows) = local.tokens.lock() {
                    let windows = windows.of(subject);
                    if windows.len() > MAX_TRACKED {
                        windows.retain(|_, (start, _)| start.elapsed() < WINDOW);
                    }
                    match windows.get_mut(id) {
                        Some(window) => {
                            if window.0.elapsed() >= WINDOW {
                                *window = (Instant::now(), 0);
                            }
                            window.1 = window.1.saturating_add(tokens);
                        }
                        None => {
                            windows.insert(id.to_owned(), (Instant::now(), tokens));
                        }
                    }
                }
            }
            Backend::Redis(manager) => {
                // The limit is only checked before the next request: any limit passes here.
                let _ = self
                    .redis_hit(manager, subject, id, "tokens", u64::MAX, tokens)
                    .await;
            }
        }
    }

    /// Adds `n` to a shared counter; refused when the count passes `limit`.
    async fn redis_hit(
        &self,
        manager: &redis::aio::ConnectionManager,
        subject: Subject,
        id: &str,
        what: &'static str,
        limit: u64,
        n: u64,
    ) -> Result<(), GatewayError> {
        let script = redis::Script::new(HIT);
        let mut conn = manager.clone();
        let key = self.redis_key(subject, id, what);
        let window_ms = WINDOW.as_millis() as u64;
        let answer = tokio::time::timeout(
            REDIS_TIMEOUT,
            script
                .key(&key)
                .arg(window_ms)
                .arg(n)
                .invoke_async::<(u64, u64)>(&mut conn),
        )
        .await;
        match answer {
            Ok(Ok((count, ms))) if count > limit => {
                Err(refused(subject, id, what, limit, Duration::from_millis(ms)))
            }
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => fail_open(&e.to_string()),
            Err(_) => fail_open("timed out"),
        }
    }

    fn redis_key(&self, subject: Subject, id: &str, what: &str) -> String {
        format!(
            "{}:rl:{}:{what}:{id}",
            self.config.redis_prefix,
            subject.word()
        )
    }
}

fn fail_open(reason: &str) -> Result<(), GatewayError> {
    tracing::warn!("rate limit not applied: Redis did not answer ({reason})");
    Ok(())
}

fn refused(subject: Subject, id: &str, what: &str, limit: u64, wait: Duration) -> GatewayError {
    // Round up: a client waiting the advertised seconds must find room.
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    GatewayError::RateLimited {
        message: format!(
            "the {} `{id}` is over its limit of {limit} {what} per minute",
            subject.word()
        ),
        retry_after_secs: secs.max(1),
    }
}

#[cfg(test)]
mod tests;
