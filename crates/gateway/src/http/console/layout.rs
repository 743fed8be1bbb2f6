//! The console's frame: every page's head, navigation and style (one inline style sheet, colours
//! chosen for a contrast of at least 4.5:1, a visible focus ring, a skip link), the login form
//! and the error page, plus the small formatting helpers the pages share.

use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::error::GatewayError;

const STYLE: &str = r#"
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: #1b1f24; background: #ffffff; }
a { color: #0a58ca; }
a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible,
summary:focus-visible { outline: 3px solid #b45309; outline-offset: 2px; }
.skip { position: absolute; left: -999px; top: 0; background: #ffffff; padding: 6px 10px; }
.skip:focus { left: 8px; }
header { background: #0f172a; color: #f8fafc; padding: 10px 20px; display: flex; gap: 24px;
  align-items: center; flex-wrap: wrap; }
header a { color: #f8fafc; text-decoration: none; padding: 4px 2px; }
header a[aria-current="page"] { border-bottom: 3px solid #fbbf24; }
header .who { margin-left: auto; color: #cbd5e1; font-size: 13px; }
header form { display: inline; }
header button { background: transparent; color: #f8fafc; border: 1px solid #94a3b8;
  border-radius: 4px; padding: 2px 8px; cursor: pointer; }
main { padding: 16px 20px 40px; max-width: 1400px; }
h1 { font-size: 22px; margin: 8px 0 12px; }
h2 { font-size: 17px; margin: 22px 0 8px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 12px; font-size: 14px; }
caption { text-align: left; color: #4a5260; padding: 4px 0; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid #d0d7de;
  vertical-align: top; }
th { background: #f3f4f6; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #4a5260; }
.badge { display: inline-block; padding: 0 6px; border-radius: 4px; font-size: 13px; }
.d-native { background: #d1e7dd; color: #0f5132; }
.d-degraded { background: #fff3cd; color: #664d03; }
.d-gateway { background: #cfe2ff; color: #084298; }
.d-ignored { background: #e2e3e5; color: #41464b; }
.d-rejected, .s-error { background: #f8d7da; color: #842029; }
.s-ok { background: #d1e7dd; color: #0f5132; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.facts dt { color: #4a5260; }
dl.facts dd { margin: 0; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; padding: 10px; overflow: auto;
  max-height: 480px; font-size: 12.5px; white-space: pre-wrap; word-break: break-word; }
form.filters { display: flex; gap: 12px; align-items: end; flex-wrap: wrap; margin: 8px 0; }
form.filters label { display: flex; flex-direction: column; font-size: 13px; color: #4a5260; }
input, select { font: inherit; padding: 4px 6px; border: 1px solid #6b7280; border-radius: 4px;
  color: #1b1f24; background: #ffffff; }
button.primary { font: inherit; background: #0a58ca; color: #ffffff; border: 0;
  border-radius: 4px; padding: 5px 12px; cursor: pointer; }
.chart { border: 1px solid #d0d7de; border-radius: 4px; padding: 6px; background: #ffffff; }
.error { color: #842029; }
"#;

/// The pages of the navigation, by path.
const NAV: &[(&str, &str)] = &[
    ("/console", "Requests"),
    ("/console/sessions", "Sessions"),
    ("/console/providers", "Providers"),
];

/// A whole page: `title`, the navigation with `active` marked, who is looking, and `body`.
pub(super) fn page(title: &str, active: &str, who: &str, body: Markup) -> Markup {
    page_with(title, active, who, false, body)
}

/// [`page`] that reloads itself every 5 s (the live request list).
pub(super) fn page_with(title: &str, active: &str, who: &str, live: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if live { meta http-equiv="refresh" content="5"; }
                title { (title) " · toolbridge console" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header {
                    strong { "toolbridge" }
                    nav aria-label="Console" {
                        @for (path, name) in NAV {
                            @if *path == active {
                                a href=(path) aria-current="page" { (name) }
                            } @else {
                                a href=(path) { (name) }
                            }
                            " "
                        }
                    }
                    span.who { "Signed in as " (who) }
                    form method="post" action="/console/logout" {
                        button type="submit" { "Sign out" }
                    }
                }
                main #main tabindex="-1" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// The login form; `error` says why the last try failed.
pub(super) fn login_page(error: Option<&str>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Sign in · toolbridge console" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                main #main {
                    h1 { "toolbridge console" }
                    p { "Sign in with a gateway key: a tenant's key shows that tenant's requests \
                         and sessions, an admin key every tenant's." }
                    @if let Some(error) = error { p.error role="alert" { (error) } }
                    form method="post" action="/console/login" {
                        label for="key" { "Gateway key" }
                        br;
                        input #key type="password" name="key" autocomplete="current-password"
                            required autofocus size="48";
                        " "
                        button.primary type="submit" { "Sign in" }
                    }
                }
            }
        }
    }
}

/// An error as a page.
pub(super) fn error_page(error: &GatewayError) -> Markup {
    page(
        "Not available",
        "",
        "",
        html! {
            p.error role="alert" { (error.to_string()) }
            p { a href="/console" { "Back to the requests" } }
        },
    )
}

/// Milliseconds as a person reads them.
pub(super) fn ms(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{:.1} s", value / 1000.0)
    } else {
        format!("{value:.1} ms")
    }
}

/// A share as a percentage.
pub(super) fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "–".to_owned();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS` UTC.
pub(super) fn time(at_ms: u64) -> String {
    let secs = at_ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = crate::platform::time::civil(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_shares_read_as_a_person_expects() {
        assert_eq!(time(0), "1970-01-01 00:00:00");
        assert_eq!(time(1_796_601_600_000), "2026-12-07 00:00:00");
        assert_eq!(percent(1, 4), "25.0%");
        assert_eq!(percent(1, 0), "–");
        assert_eq!(ms(12.34), "12.3 ms");
    }

    #[test]
    fn values_are_escaped() {
        let markup = page("<b>", "/console", "<script>", html! {});
        let text = markup.into_string();
        assert!(!text.contains("<script>"), "{text}");
        assert!(text.contains("&lt;script&gt;"));
    }
}
