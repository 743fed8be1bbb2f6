//! The reasoning efforts block of `toolbridge providers`: what each of the eight efforts sends.

use toolbridge_providers::profile::Profile;

/// The profile's effort table, efforts said alike on one row, weakest first.
pub(super) fn rows(profile: &Profile) -> String {
    let mut rows: Vec<(Vec<&str>, String)> = Vec::new();
    for effort in toolbridge_providers::profile::EFFORTS {
        let said = match profile.effort(effort) {
            None => "not sent (a diagnostic says so)".to_owned(),
            Some(say) => {
                let mut parts: Vec<String> = Vec::new();
                match say.budget {
                    Some(0) => parts.push("thinking off".to_owned()),
                    Some(budget) => parts.push(format!("thinking budget {budget}")),
                    None => {}
                }
                parts.extend(say.fields.iter().map(|(k, v)| format!("{k}={v}")));
                if parts.is_empty() {
                    "nothing set".to_owned()
                } else {
                    parts.join(" ")
                }
            }
        };
        match rows.last_mut() {
            Some((efforts, last)) if *last == said => efforts.push(effort),
            _ => rows.push((vec![effort], said)),
        }
    }
    let mut out = "\nreasoning efforts (reasoning.effort: what the provider is sent):\n".to_owned();
    for (efforts, said) in rows {
        out.push_str(&format!("  {:<36} {said}\n", efforts.join(", ")));
    }
    out
}
