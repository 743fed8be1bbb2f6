//! `toolbridge keys create|list|revoke`: gateway keys in the configured store.
//!
//! The store is the one the gateway uses: `TOOLBRIDGE_STORE_URL`, else the config file's
//! `store_url`, else `sqlite://toolbridge.db`. Only the file's `store_url` is read, so keys can
//! be managed on a host without the providers' secrets.

use std::path::Path;

use toolbridge_store::{KeyRecord, KeyStore, SqlStore};

use super::keys::{self, Scope, Scopes};

/// The longest key name.
pub(crate) const MAX_NAME_LEN: usize = 128;

/// What `keys create` was asked for.
#[derive(Debug, Clone, Default)]
pub(crate) struct NewKey {
    pub name: String,
    pub models: Option<Vec<String>>,
    pub tools: Option<Vec<String>>,
    pub daily_tokens: Option<u64>,
    pub monthly_tokens: Option<u64>,
    pub tenant: Option<String>,
    pub admin: bool,
}

/// The store URL the gateway would use with `config` (see the module docs).
pub(crate) fn store_url(config: Option<&Path>) -> Result<String, String> {
    if let Ok(url) = std::env::var("TOOLBRIDGE_STORE_URL")
        && !url.is_empty()
    {
        return check_url(url);
    }
    if let Some(path) = config {
        #[derive(serde::Deserialize)]
        struct OnlyStore {
            store_url: Option<String>,
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
        let file: OnlyStore = toml::from_str(&text)
            .map_err(|e| format!("cannot parse config file {}: {e}", path.display()))?;
        if let Some(url) = file.store_url {
            return check_url(url);
        }
    }
    Ok("sqlite://toolbridge.db".to_owned())
}

fn check_url(url: String) -> Result<String, String> {
    if url == "none" {
        return Err("keys live in the store, and the store is off (`store_url = \"none\"`)".into());
    }
    Ok(url)
}

async fn open(config: Option<&Path>) -> Result<SqlStore, String> {
    let url = store_url(config)?;
    SqlStore::open(&url)
        .await
        .map_err(|e| format!("cannot open the store: {e}"))
}

/// Creates a key; the text printed, which holds the secret (shown this once).
pub(crate) async fn create(config: Option<&Path>, new: NewKey) -> Result<String, String> {
    let name = new.name.trim().to_owned();
    if name.is_empty() || name.len() > MAX_NAME_LEN || name.chars().any(char::is_control) {
        return Err(format!(
            "--name must be 1 to {MAX_NAME_LEN} printable characters"
        ));
    }
    let scopes = Scopes {
        models: new.models,
        tools: new.tools,
        daily_tokens: new.daily_tokens,
        monthly_tokens: new.monthly_tokens,
        tenant: new.tenant,
        admin: new.admin,
    };
    Scope::compile(&scopes).map_err(|e| format!("invalid scopes: {e}"))?;
    let store = open(config).await?;
    let secret = keys::generate_secret()?;
    let record = KeyRecord {
        id: keys::generate_id()?,
        name,
        hash: keys::hash_secret(&secret),
        scopes: serde_json::to_value(&scopes).map_err(|e| e.to_string())?,
        created_at: crate::platform::time::now(),
        revoked_at: None,
    };
    store
        .create_key(&record)
        .await
        .map_err(|e| format!("cannot store the key: {e}"))?;
    Ok(format!(
        "id: {}\nname: {}\nscopes: {}\nsecret: {secret}\n\nThe secret is shown only now; the gateway keeps its hash.\n",
        record.id, record.name, record.scopes
    ))
}

/// Every key, one a line, without secrets or hashes.
pub(crate) async fn list(config: Option<&Path>) -> Result<String, String> {
    let store = open(config).await?;
    let keys = store
        .list_keys()
        .await
        .map_err(|e| format!("cannot list keys: {e}"))?;
    if keys.is_empty() {
        return Ok("no keys\n".to_owned());
    }
    let mut out = String::from("id\tname\tcreated_at\trevoked_at\tscopes\n");
    for k in keys {
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\n",
            k.id,
            k.name,
            k.created_at,
            k.revoked_at
                .map_or_else(|| "-".to_owned(), |t| t.to_string()),
            k.scopes
        ));
    }
    Ok(out)
}

/// Revokes a key by id.
pub(crate) async fn revoke(config: Option<&Path>, id: &str) -> Result<String, String> {
    let store = open(config).await?;
    let revoked = store
        .revoke_key(id, crate::platform::time::now())
        .await
        .map_err(|e| format!("cannot revoke: {e}"))?;
    if revoked {
        Ok(format!(
            "revoked {id} (gateways drop it within their key cache TTL, `key_cache_secs`)\n"
        ))
    } else {
        Err(format!("no active key `{id}`"))
    }
}
