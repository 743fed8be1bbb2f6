//! Tests of the rate limits.

use super::config::ProviderLimitsFile;
use super::*;

fn config(rpm: u32, tpm: Option<u64>) -> LimitsConfig {
    LimitsConfig::from_file(
        LimitsFile {
            key_requests_per_minute: Some(rpm),
            key_tokens_per_minute: tpm,
            providers: [(
                "up".to_owned(),
                ProviderLimitsFile {
                    requests_per_minute: Some(1),
                    tokens_per_minute: None,
                },
            )]
            .into(),
            ..LimitsFile::default()
        },
        None,
        &["up"],
    )
    .unwrap()
}

#[tokio::test]
async fn in_process_limits_refuse_with_a_retry_after() {
    let limits = Limits::new(config(2, Some(100))).unwrap();
    assert!(limits.check_request("a").await.is_ok());
    assert!(limits.check_request("a").await.is_ok());
    let refused = limits.check_request("a").await.unwrap_err();
    assert_eq!(refused.code(), "rate_limit_exceeded");
    assert_eq!(refused.status().as_u16(), 429);
    assert!(
        matches!(refused, GatewayError::RateLimited { retry_after_secs, .. } if (1..=60).contains(&retry_after_secs))
    );
    assert!(
        limits.check_request("b").await.is_ok(),
        "keys are counted apart"
    );

    limits.record_tokens("b", "up", 150).await;
    let over = limits.check_request("b").await.unwrap_err();
    assert!(over.to_string().contains("100 tokens per minute"), "{over}");

    assert!(limits.check_upstream("up").await.is_ok());
    assert!(limits.check_upstream("up").await.is_err());
    assert!(limits.check_upstream("other").await.is_ok());
}

#[test]
fn limits_config_names_bad_fields() {
    let zero = LimitsConfig::from_file(
        LimitsFile {
            key_requests_per_minute: Some(0),
            ..LimitsFile::default()
        },
        None,
        &[],
    )
    .unwrap_err();
    assert_eq!(zero.0, "limits.key_requests_per_minute");
    let unknown = LimitsConfig::from_file(
        LimitsFile {
            providers: [("nope".to_owned(), ProviderLimitsFile::default())].into(),
            ..LimitsFile::default()
        },
        None,
        &["up"],
    )
    .unwrap_err();
    assert_eq!(unknown.0, "limits.providers.nope");
    let bad_url = LimitsConfig::from_file(
        LimitsFile {
            redis_url: Some("http://x".to_owned()),
            ..LimitsFile::default()
        },
        None,
        &[],
    )
    .unwrap_err();
    assert_eq!(bad_url.0, "limits.redis_url");
    // TLS to Redis (rediss://, rustls with the webpki roots) is accepted.
    let tls = LimitsConfig::from_file(
        LimitsFile::default(),
        Some("rediss://user:secret@redis.internal:6380/0".to_owned()),
        &[],
    )
    .unwrap();
    assert!(tls.redis_url.unwrap().starts_with("rediss://"));
}
