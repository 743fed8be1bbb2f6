//! A gateway with API keys, for the tests of tenants and of what one key may see of another's:
//! the keys of [`KEYS`] (two of team-a, one that is its own tenant, an admin), each sending the
//! [`secret`] of its name.

use toolbridge_gateway::hash_secret;

use super::Served;

/// Two keys of team-a, one key that is its own tenant, an admin: name and the rest of its table.
pub const KEYS: [(&str, &str); 4] = [
    ("a1", "tenant = \"team-a\""),
    ("a2", "tenant = \"team-a\""),
    ("b", ""),
    ("ops", "admin = true"),
];

/// The secret the key `name` sends.
pub fn secret(name: &str) -> String {
    format!("tb-test-secret-of-{name}")
}

/// Starts a gateway whose config file is `top` (top-level settings), the `[[keys]]` of [`KEYS`],
/// then `tables` (the rest), with its store at `store_url`.
pub async fn start(top: &str, tables: &str, store_url: &str) -> Served {
    let mut text = top.to_owned();
    for (name, extra) in KEYS {
        text.push_str(&format!(
            "\n[[keys]]\nname = \"{name}\"\nhash = \"{}\"\n{extra}\n",
            hash_secret(&secret(name))
        ));
    }
    text.push('\n');
    text.push_str(tables);
    Served::start(&text, store_url).await
}
