//! The real clients ring-3 tests drive: the OpenAI Python SDK, the Codex CLI, the Vercel AI
//! SDK, openai-node, the OpenAI Agents SDK and a browser (Chromium driven by playwright-core),
//! all installed by `scripts/test`. Each finder returns `None` when the tool is absent, so
//! the test can say it skipped; on CI (`CI` set) an absent tool is a failure, because CI installs
//! them.

use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn on_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty())
}

/// A Python interpreter with the `openai` package: `$TOOLBRIDGE_TEST_PYTHON` (trusted as is),
/// else the workspace's `.venv`.
pub fn python_with_openai() -> Option<PathBuf> {
    if let Some(explicit) = std::env::var_os("TOOLBRIDGE_TEST_PYTHON").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(explicit));
    }
    let venv = workspace_root().join(".venv/bin/python");
    let usable = venv.exists()
        && std::process::Command::new(&venv)
            .args(["-c", "import openai"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if usable {
        return Some(venv);
    }
    if on_ci() {
        panic!(
            "CI is set but there is no Python with the openai package: TOOLBRIDGE_TEST_PYTHON is \
             unset and {} is missing or cannot import openai; CI must run scripts/test, which \
             installs it",
            venv.display()
        );
    }
    eprintln!(
        "SKIPPED: no Python with the openai package; run scripts/test to install it into .venv"
    );
    None
}

/// The Codex CLI: `$TOOLBRIDGE_TEST_CODEX`, else the copy `scripts/test` installs in `.tools/`.
pub fn codex() -> Option<PathBuf> {
    let path = std::env::var_os("TOOLBRIDGE_TEST_CODEX")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".tools/codex/node_modules/.bin/codex"));
    if path.exists() {
        return Some(path);
    }
    if on_ci() {
        panic!(
            "Codex CLI not found at {}: scripts/test installs it on CI",
            path.display()
        );
    }
    eprintln!(
        "SKIPPED: Codex CLI test: {} is absent; run scripts/test to install it",
        path.display()
    );
    None
}

/// The Codex CLI 0.171.0 (the release with the optional paths: MCP tools behind `tool_search`,
/// the model catalog, standalone search): `$TOOLBRIDGE_TEST_CODEX_0171`, else the copy
/// `scripts/test` installs in `.tools/codex-0171/`.
pub fn codex_0171() -> Option<PathBuf> {
    let path = std::env::var_os("TOOLBRIDGE_TEST_CODEX_0171")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".tools/codex-0171/node_modules/.bin/codex"));
    if path.exists() {
        return Some(path);
    }
    if on_ci() {
        panic!(
            "Codex CLI 0.171 not found at {}: scripts/test installs it on CI",
            path.display()
        );
    }
    eprintln!(
        "SKIPPED: Codex CLI 0.171 test: {} is absent; run scripts/test to install it",
        path.display()
    );
    None
}

/// The Vercel AI SDK (`ai` with `@ai-sdk/openai`): the folder whose `node_modules` holds them,
/// `$TOOLBRIDGE_TEST_AISDK`, else the copy `scripts/test` installs in `.tools/aisdk`.
pub fn aisdk() -> Option<PathBuf> {
    let dir = std::env::var_os("TOOLBRIDGE_TEST_AISDK")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".tools/aisdk"));
    let installed = ["ai", "@ai-sdk/openai"].iter().all(|package| {
        dir.join("node_modules")
            .join(package)
            .join("package.json")
            .exists()
    });
    if installed {
        return Some(dir);
    }
    if on_ci() {
        panic!(
            "the AI SDK is not installed in {}: scripts/test installs it on CI",
            dir.display()
        );
    }
    eprintln!(
        "SKIPPED: AI SDK test: {} has no node_modules/ai and node_modules/@ai-sdk/openai; run \
         scripts/test to install them",
        dir.display()
    );
    None
}

/// The official openai-node SDK: the folder whose `node_modules` holds `openai`,
/// `$TOOLBRIDGE_TEST_OPENAI_NODE`, else the copy `scripts/test` installs in `.tools/openai-node`.
pub fn openai_node() -> Option<PathBuf> {
    let dir = std::env::var_os("TOOLBRIDGE_TEST_OPENAI_NODE")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".tools/openai-node"));
    if dir.join("node_modules/openai/package.json").exists() {
        return Some(dir);
    }
    if on_ci() {
        panic!(
            "openai-node is not installed in {}: scripts/test installs it on CI",
            dir.display()
        );
    }
    eprintln!(
        "SKIPPED: openai-node test: {} has no node_modules/openai; run scripts/test to install it",
        dir.display()
    );
    None
}

/// A Python interpreter with the OpenAI Agents SDK (`agents`): `$TOOLBRIDGE_TEST_AGENTS_PYTHON`,
/// else the workspace's `.venv-agents` (its own venv: the Agents SDK pins its own `openai`).
pub fn python_with_agents() -> Option<PathBuf> {
    let python = std::env::var_os("TOOLBRIDGE_TEST_AGENTS_PYTHON")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv-agents/bin/python"));
    let usable = python.exists()
        && std::process::Command::new(&python)
            .args(["-c", "import agents"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if usable {
        return Some(python);
    }
    if on_ci() {
        panic!(
            "no Python with the Agents SDK at {}: scripts/test installs it on CI",
            python.display()
        );
    }
    eprintln!(
        "SKIPPED: Agents SDK test: {} cannot import agents; run scripts/test to install it",
        python.display()
    );
    None
}

/// A browser for the console's test: Debian's Chromium (`$TOOLBRIDGE_TEST_CHROMIUM`, else
/// `/usr/bin/chromium`) and the folder whose `node_modules` holds playwright-core
/// (`$TOOLBRIDGE_TEST_PLAYWRIGHT`, else `.tools/playwright`).
pub fn browser() -> Option<(PathBuf, PathBuf)> {
    let chromium = std::env::var_os("TOOLBRIDGE_TEST_CHROMIUM")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    let playwright = std::env::var_os("TOOLBRIDGE_TEST_PLAYWRIGHT")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".tools/playwright"));
    let installed = playwright
        .join("node_modules/playwright-core/package.json")
        .exists();
    if chromium.exists() && installed {
        return Some((chromium, playwright));
    }
    if on_ci() {
        panic!(
            "no browser: {} or playwright-core in {} is missing; scripts/test installs both",
            chromium.display(),
            playwright.display()
        );
    }
    eprintln!(
        "SKIPPED: browser test: {} or playwright-core in {} is missing; run scripts/test",
        chromium.display(),
        playwright.display()
    );
    None
}
