//! Loading tests: secrets stay out of `Debug`, and every section's validation names its field.

use super::*;

#[test]
fn debug_output_never_shows_secrets() {
    let env = |k: &str| match k {
        "TOOLBRIDGE_UPSTREAM_URL" => Some("http://127.0.0.1:1/v1".to_owned()),
        "TOOLBRIDGE_UPSTREAM_API_KEY" => Some("sk-very-secret".to_owned()),
        "TOOLBRIDGE_API_KEYS" => Some("tb-gateway-secret".to_owned()),
        _ => None,
    };
    let config = Config::from_env(&env).unwrap();
    let shown = format!("{config:?}");
    assert!(!shown.contains("sk-very-secret"), "{shown}");
    assert!(!shown.contains("tb-gateway-secret"), "{shown}");
    assert!(shown.contains("[redacted]"));
}

fn with_dialect(dialect: &str) -> Result<Config, ConfigError> {
    let text = format!(
        "[providers.up]\ndialect = \"{dialect}\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
    );
    let file: FileConfig = toml::from_str(&text).unwrap();
    Config::from_file(file, &|_: &str| None)
}

#[test]
fn the_dialect_is_read_and_an_unknown_one_names_the_field() {
    assert_eq!(
        with_dialect("chat").unwrap().providers["up"].dialect,
        Dialect::Chat
    );
    assert_eq!(
        with_dialect("anthropic").unwrap().providers["up"].dialect,
        Dialect::Anthropic
    );
    assert_eq!(
        with_dialect("gemini").unwrap().providers["up"].dialect,
        Dialect::Gemini
    );
    let responses = with_dialect("responses").unwrap();
    assert_eq!(responses.providers["up"].dialect, Dialect::Responses);
    assert_eq!(responses.providers["up"].profile.name, "responses");
    assert!(responses.providers["up"].profile.tools.responses_native);
    let error = with_dialect("bedrock").unwrap_err();
    assert_eq!(
        error,
        ConfigError::invalid(
            "providers.up.dialect",
            "`bedrock` is not a supported dialect (supported: chat, anthropic, gemini, responses)"
        )
    );
}

fn with_preset(lines: &str) -> Result<Config, ConfigError> {
    let text = format!(
        "[providers.up]\n{lines}\nbase_url = \"http://127.0.0.1:1/v1\"\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
    );
    let file: FileConfig = toml::from_str(&text).unwrap();
    Config::from_file(file, &|_: &str| None)
}

/// A preset names its dialect: a provider that names only the preset speaks it (a Responses
/// preset used to be spoken to in Chat Completions), and one that names both must agree.
#[test]
fn the_dialect_comes_from_the_preset_and_a_contradiction_is_refused() {
    let up = |lines: &str| with_preset(lines).map(|c| c.providers["up"].clone());
    let native = up("preset = \"deepseek-responses\"").unwrap();
    assert_eq!(native.dialect, Dialect::Responses);
    assert!(native.profile.tools.responses_native);
    assert_eq!(
        up("preset = \"anthropic\"").unwrap().dialect,
        Dialect::Anthropic
    );
    assert_eq!(up("preset = \"glm\"").unwrap().dialect, Dialect::Chat);
    let neither = up("").unwrap();
    assert_eq!(
        (neither.dialect, neither.profile.name.as_str()),
        (Dialect::Chat, "generic")
    );
    assert_eq!(
        up("dialect = \"chat\"\npreset = \"deepseek-responses\"").unwrap_err(),
        ConfigError::invalid(
            "providers.up.dialect",
            "`deepseek-responses` is a preset of the responses dialect, not chat"
        )
    );
}

/// A profile patch is checked at load, against the whole profile it makes: a field no
/// profile has is refused with the patch's path, the provider's or the model's.
#[test]
fn a_profile_patch_is_checked_at_load_with_its_path() {
    let load = |patch: &str| {
        let text = format!(
            "[providers.up]\nbase_url = \"http://127.0.0.1:1/v1\"\npreset = \"glm\"\n{patch}\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
        );
        let file: FileConfig = toml::from_str(&text).unwrap();
        Config::from_file(file, &|_: &str| None)
    };
    let ok = load("[providers.up.models.m.profile.tools]\nweb_search = \"none\"\n").unwrap();
    let up = &ok.providers["up"];
    assert!(up.profile_for("other").tools.web_search.is_some());
    assert_eq!(up.profile_for("m").tools.web_search, None);
    assert_eq!(up.profile_for("m").name, "glm");
    for (patch, field) in [
        (
            "[providers.up.profile]\ndeveloper_rol = true\n",
            "providers.up.profile",
        ),
        (
            "[providers.up.models.m.profile.tools.tool_types]\nshell = \"gateway\"\n",
            "providers.up.models.m.profile",
        ),
    ] {
        match load(patch) {
            Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field, "{patch}"),
            other => panic!("{patch}: {other:?}"),
        }
    }
}

fn with_keys(keys: &str, store: &str) -> Result<Config, ConfigError> {
    let text = format!(
        "{keys}\n[providers.up]\nbase_url = \"http://127.0.0.1:1/v1\"\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
    );
    let file: FileConfig = toml::from_str(&text).unwrap();
    let store = store.to_owned();
    Config::from_file(file, &move |k: &str| {
        (k == "TOOLBRIDGE_STORE_URL").then(|| store.clone())
    })
}

#[test]
fn keys_and_limits_are_validated_with_the_field_named() {
    let hash = crate::platform::auth::keys::hash_secret("tb-x");
    let ok = with_keys(
        &format!("api_keys = [\"plain\"]\n[[keys]]\nname = \"ci\"\nhash = \"{hash}\"\nmodels = [\"gpt-*\"]\ndaily_tokens = 5\n"),
        "sqlite://x.db",
    )
    .unwrap();
    assert_eq!(ok.keys.len(), 2);
    assert_eq!(ok.keys[0].id, "api_keys[0]");
    assert_eq!(
        ok.keys[0].hash,
        crate::platform::auth::keys::hash_secret("plain")
    );
    assert_eq!(ok.keys[1].id, "ci");
    assert!(
        !format!("{ok:?}").contains(&hash),
        "hashes stay out of Debug"
    );

    let bad_hash = with_keys("[[keys]]\nname = \"ci\"\nhash = \"tb-plain\"\n", "none");
    assert!(matches!(bad_hash, Err(ConfigError::Invalid { field, .. }) if field == "keys[0].hash"));
    let no_store = with_keys(
        &format!("[[keys]]\nname = \"ci\"\nhash = \"{hash}\"\nmonthly_tokens = 5\n"),
        "none",
    );
    assert!(matches!(no_store, Err(ConfigError::Invalid { field, .. }) if field == "keys[0]"));
    let bad_glob = with_keys(
        &format!("[[keys]]\nname = \"ci\"\nhash = \"{hash}\"\nmodels = [\"[\"]\n"),
        "none",
    );
    assert!(matches!(bad_glob, Err(ConfigError::Invalid { field, .. }) if field == "keys[0]"));
    let twice = with_keys(
        &format!(
            "[[keys]]\nname = \"a\"\nhash = \"{hash}\"\n[[keys]]\nname = \"b\"\nhash = \"{hash}\"\n"
        ),
        "none",
    );
    assert!(matches!(twice, Err(ConfigError::Invalid { field, .. }) if field == "keys[1].hash"));
    let limit = with_keys("[limits.providers.nope]\nrequests_per_minute = 5\n", "none");
    assert!(
        matches!(limit, Err(ConfigError::Invalid { field, .. }) if field == "limits.providers.nope")
    );
}

fn with_tools(tools: &str) -> Result<Config, ConfigError> {
    let text = format!(
        "[providers.up]\nbase_url = \"http://127.0.0.1:1/v1\"\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n\n{tools}"
    );
    let file: FileConfig = toml::from_str(&text).unwrap();
    Config::from_file(file, &|_: &str| None)
}

fn with_dialect_for(entries: &str) -> Result<Config, ConfigError> {
    let text = format!(
        "[providers.ds]\npreset = \"deepseek\"\nbase_url = \"http://127.0.0.1:1/v1\"\n{entries}\n[[routes]]\nmodel = \"*\"\nprovider = \"ds\"\n"
    );
    let file: FileConfig = toml::from_str(&text).unwrap();
    Config::from_file(file, &|_: &str| None)
}

/// Issue 22: an image call (180 s by default) is never cut by the loop's budget (120 s by
/// default): unset, the budget makes room for the longest call; set shorter, the config is
/// refused with a message naming both.
#[test]
fn the_loop_budget_leaves_room_for_the_longest_tool_timeout() {
    let images =
        "[gateway_tools.images]\nurl = \"http://127.0.0.1:1/v1\"\nmodel = \"gpt-image-1\"\n";
    let budget = |config: Config| config.gateway_tools.unwrap().limits.time_budget.as_secs();
    assert_eq!(budget(with_tools("[gateway_tools]\n").unwrap()), 120);
    assert_eq!(
        budget(with_tools(&format!("[gateway_tools]\n{images}")).unwrap()),
        240,
        "the images timeout and a minute for the rounds"
    );
    assert_eq!(
        budget(
            with_tools(&format!(
                "[gateway_tools]\ntime_budget_secs = 180\n{images}"
            ))
            .unwrap()
        ),
        180
    );
    let short = with_tools(&format!(
        "[gateway_tools]\ntime_budget_secs = 100\n{images}"
    ));
    let Err(ConfigError::Invalid { field, message }) = short else {
        panic!("{short:?}");
    };
    assert_eq!(field, "gateway_tools");
    assert!(
        message.contains("time_budget_secs = 100")
            && message.contains("images.timeout_secs (180 s)"),
        "{message}"
    );
    let slow_tools = with_tools("[gateway_tools]\ntime_budget_secs = 20\ntool_timeout_secs = 30\n");
    assert!(
        matches!(&slow_tools, Err(ConfigError::Invalid { message, .. }) if message.contains("tool_timeout_secs")),
        "{slow_tools:?}"
    );
}

/// One account, two dialects: the models a `dialect_for` entry names are served in its dialect
/// with its preset (and the provider's per-model patches over it), the others as the provider.
#[test]
fn dialect_for_serves_the_models_it_names_in_its_dialect() {
    let config = with_dialect_for(
        "[providers.ds.models.\"deepseek-v4-pro\".profile.tools]\nmax_tools = 7\n\
         [[providers.ds.dialect_for]]\nmodels = \"deepseek-v4-*\"\npreset = \"deepseek-responses\"\n",
    )
    .unwrap();
    let ds = &config.providers["ds"];
    let native = ds.for_model("deepseek-v4-flash");
    assert_eq!(native.dialect, Dialect::Responses);
    assert_eq!(native.name, "ds");
    assert_eq!(native.profile.name, "deepseek-responses");
    assert!(native.profile.tools.responses_native);
    assert_eq!(
        ds.for_model("deepseek-v4-pro")
            .profile_for("deepseek-v4-pro")
            .tools
            .max_tools,
        Some(7)
    );
    let chat = ds.for_model("deepseek-chat");
    assert_eq!(chat.dialect, Dialect::Chat);
    assert_eq!(chat.profile.name, "deepseek");
    // Routing resolves the target to the provider as it serves the model.
    let targets = config
        .targets_for("deepseek-v4-flash", &RouteSignals::default())
        .unwrap();
    assert_eq!(targets[0].provider.dialect, Dialect::Responses);
}

#[test]
fn a_dialect_for_entry_is_checked_at_load_with_its_path() {
    for (entry, field, message) in [
        (
            "models = \"m\"\n",
            "providers.ds.dialect_for[0].dialect",
            "an entry needs a dialect, a preset, or both",
        ),
        (
            "models = \"m\"\ndialect = \"bedrock\"\n",
            "providers.ds.dialect_for[0].dialect",
            "`bedrock` is not a supported dialect (supported: chat, anthropic, gemini, responses)",
        ),
        (
            "models = \"m\"\ndialect = \"chat\"\npreset = \"deepseek-responses\"\n",
            "providers.ds.dialect_for[0].dialect",
            "`deepseek-responses` is a preset of the responses dialect, not chat",
        ),
        (
            "models = \"m[\"\ndialect = \"responses\"\n",
            "providers.ds.dialect_for[0].models",
            "",
        ),
        (
            "models = \" \"\ndialect = \"responses\"\n",
            "providers.ds.dialect_for[0].models",
            "must name the upstream models (a name or a glob)",
        ),
        (
            "models = \"m\"\npreset = \"deepseek-response\"\n",
            "providers.ds.dialect_for[0].preset",
            "",
        ),
    ] {
        let error =
            with_dialect_for(&format!("[[providers.ds.dialect_for]]\n{entry}")).unwrap_err();
        let shown = error.to_string();
        assert!(shown.contains(field), "{entry}: {shown}");
        assert!(shown.contains(message), "{entry}: {shown}");
    }
}
