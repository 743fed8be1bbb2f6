//! Sealing reasoning into `encrypted_content`: AES-256-GCM under keys from configuration.
//!
//! A blob is `tbr1.` followed by unpadded base64url of: one key-id byte (the first byte of the
//! key's SHA-256), a 12-byte random nonce, and the ciphertext with its tag. The first configured
//! key seals; every configured key opens, so keys can be rotated by adding a new one in front.
//! Without configured keys the process makes a random one: blobs then do not survive a restart
//! or travel between gateway processes (they are ignored with a diagnostic, never trusted).

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::digest::{SHA256, digest};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use toolbridge_core::reasoning::Sealer;

/// What every sealed blob starts with.
pub(crate) const PREFIX: &str = "tbr1.";
const AAD: &[u8] = b"toolbridge-reasoning-v1";
/// The most reasoning text sealed into one blob.
pub(crate) const MAX_SEALED_TEXT: usize = 1024 * 1024;
/// The longest blob opened.
const MAX_BLOB: usize = PREFIX.len() + (MAX_SEALED_TEXT + 64) * 4 / 3 + 64;

/// AES-256-GCM sealer with a key ring.
pub(crate) struct AeadSealer {
    keys: Vec<(u8, LessSafeKey)>,
    random: SystemRandom,
}

impl std::fmt::Debug for AeadSealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        write!(f, "AeadSealer({} keys)", self.keys.len())
    }
}

impl AeadSealer {
    /// A sealer over 32-byte keys; the first one seals.
    pub(crate) fn new(keys: &[[u8; 32]]) -> Result<Self, String> {
        if keys.is_empty() {
            return Err("at least one key is needed".to_owned());
        }
        let mut ring = Vec::with_capacity(keys.len());
        for key in keys {
            let id = digest(&SHA256, key).as_ref()[0];
            let unbound =
                UnboundKey::new(&AES_256_GCM, key).map_err(|_| "invalid key".to_owned())?;
            ring.push((id, LessSafeKey::new(unbound)));
        }
        Ok(Self {
            keys: ring,
            random: SystemRandom::new(),
        })
    }

    /// A sealer with a fresh random key.
    pub(crate) fn random() -> Result<Self, String> {
        let mut key = [0u8; 32];
        SystemRandom::new()
            .fill(&mut key)
            .map_err(|_| "no randomness".to_owned())?;
        Self::new(&[key])
    }

    /// Parses a base64 (standard or url-safe) 32-byte key.
    pub(crate) fn parse_key(text: &str) -> Result<[u8; 32], String> {
        let text = text.trim();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .or_else(|_| URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')))
            .map_err(|_| "a reasoning key must be base64".to_owned())?;
        <[u8; 32]>::try_from(bytes.as_slice())
            .map_err(|_| format!("a reasoning key must be 32 bytes, not {}", bytes.len()))
    }
}

impl Sealer for AeadSealer {
    fn seal(&self, text: &str) -> Option<String> {
        if text.len() > MAX_SEALED_TEXT {
            return None;
        }
        let (id, key) = self.keys.first()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).ok()?;
        let mut buffer = text.as_bytes().to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(AAD),
            &mut buffer,
        )
        .ok()?;
        let mut blob = Vec::with_capacity(1 + NONCE_LEN + buffer.len());
        blob.push(*id);
        blob.extend_from_slice(&nonce);
        blob.extend_from_slice(&buffer);
        Some(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(blob)))
    }

    fn open(&self, blob: &str) -> Result<String, String> {
        let Some(body) = blob.strip_prefix(PREFIX) else {
            return Err("it was not made by toolbridge".to_owned());
        };
        if blob.len() > MAX_BLOB {
            return Err("it is larger than any blob toolbridge makes".to_owned());
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| "it is not valid base64url".to_owned())?;
        if bytes.len() < 1 + NONCE_LEN {
            return Err("it is truncated".to_owned());
        }
        let (id, rest) = (bytes[0], &bytes[1..]);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        for (key_id, key) in &self.keys {
            if *key_id != id {
                continue;
            }
            let Ok(nonce) = Nonce::try_assume_unique_for_key(nonce) else {
                continue;
            };
            let mut buffer = sealed.to_vec();
            if let Ok(plain) = key.open_in_place(nonce, Aad::from(AAD), &mut buffer) {
                return String::from_utf8(plain.to_vec())
                    .map_err(|_| "its content is not text".to_owned());
            }
        }
        Err("it was sealed with another key, or it was altered".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_blob_opens_only_intact_and_only_with_its_key() {
        let a = AeadSealer::new(&[[7u8; 32]]).unwrap();
        let blob = a.seal("thinking about it").unwrap();
        assert!(blob.starts_with("tbr1."));
        assert_eq!(a.open(&blob).unwrap(), "thinking about it");
        // Two seals of the same text differ (random nonce).
        assert_ne!(a.seal("x"), a.seal("x"));

        let mut bytes = URL_SAFE_NO_PAD.decode(&blob[5..]).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let tampered = format!("tbr1.{}", URL_SAFE_NO_PAD.encode(bytes));
        assert!(a.open(&tampered).is_err());

        let b = AeadSealer::new(&[[9u8; 32]]).unwrap();
        assert!(b.open(&blob).is_err());
        assert!(a.open("gAAAA-openai-blob").is_err());
        assert!(a.open("tbr1.!!").is_err());

        // Rotation: a ring with a new key first still opens the old key's blobs.
        let rotated = AeadSealer::new(&[[9u8; 32], [7u8; 32]]).unwrap();
        assert_eq!(rotated.open(&blob).unwrap(), "thinking about it");
        assert!(a.seal(&"x".repeat(MAX_SEALED_TEXT + 1)).is_none());
    }

    #[test]
    fn keys_parse_from_base64() {
        let key = base64::engine::general_purpose::STANDARD.encode([1u8; 32]);
        assert_eq!(AeadSealer::parse_key(&key).unwrap(), [1u8; 32]);
        assert!(
            AeadSealer::parse_key("c2hvcnQ=")
                .unwrap_err()
                .contains("32 bytes")
        );
    }
}
